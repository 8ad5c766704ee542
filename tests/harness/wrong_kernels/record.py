"""Runs each wrong kernel here beside its reference, as the judge does (evaluator.loading: the
same seed for both models' weights, the inputs drawn from a seed, fp32 on the CPU), and stores
the two outputs in outputs/NAME.pt.xz, so that the diagnosis is tested on what real wrong
kernels returned, with no GPU and no kernel run.

    .venv/bin/python -m tests.harness.wrong_kernels.record   # rewrites outputs/
"""

from __future__ import annotations

import io
import lzma
from pathlib import Path
from typing import Any

import torch

from evaluator.config import DEFAULT_TOLERANCE
from evaluator.loading import (
    build_model,
    derive_seed,
    make_init_inputs,
    make_inputs,
    module_from_source,
)

HERE = Path(__file__).resolve().parent
OUTPUTS = HERE / "outputs"
CASES = ("tail_column_relu", "first_row_bias", "conv_halo", "transposed_matmul",
         "shifted_silu", "unscaled_scores", "nan_softmax", "tf32_matmul")
SEED = 64  # the judge's seed, stored with the outputs: the weights' and the inputs' derive

TOLERANCE = DEFAULT_TOLERANCE["fp32"]  # the judge's atol and rtol for an fp32 problem


def case(name: str) -> dict[str, Any]:
    """The case's reference model and its inputs (seeded as stored), for recomputations."""
    module = module_from_source((HERE / f"{name}.py").read_text(), f"wrong_kernel_{name}")
    # Seeds derived apart, as the judge's are: one seed for both would draw a bias equal to
    # the input's first row.
    init_seed = derive_seed(SEED, "init")
    init = make_init_inputs(module, init_seed)
    return {"module": module, "model": build_model(module.Model, init, init_seed, "cpu", "fp32"),
            "candidate": build_model(module.ModelNew, init, init_seed, "cpu", "fp32"),
            "inputs": make_inputs(module, derive_seed(SEED, "trial", 1), "cpu", "fp32")}


def run(name: str) -> dict[str, torch.Tensor]:
    """The reference's output and the wrong kernel's, computed now."""
    made = case(name)
    with torch.no_grad():
        return {"expected": made["model"](*made["inputs"]),
                "got": made["candidate"](*made["inputs"])}


def stored(name: str) -> dict[str, Any]:
    """What record() stored for the case: seed, expected, got."""
    data = lzma.decompress((OUTPUTS / f"{name}.pt.xz").read_bytes())
    return torch.load(io.BytesIO(data), weights_only=True)


def record(name: str) -> Path:
    buffer = io.BytesIO()
    torch.save({"seed": SEED, **{k: v.contiguous() for k, v in run(name).items()}}, buffer)
    path = OUTPUTS / f"{name}.pt.xz"
    OUTPUTS.mkdir(exist_ok=True)
    # xz: its window spans both outputs, which mostly agree (about half the bytes of gzip).
    path.write_bytes(lzma.compress(buffer.getvalue()))
    return path


if __name__ == "__main__":
    for name in CASES:
        print(record(name))
