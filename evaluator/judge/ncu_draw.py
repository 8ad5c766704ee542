"""The inputs of an ncu report's call (evaluator/runner/ncu.py), drawn in a trusted process of
their own: `python -m evaluator.judge.ncu_draw PATH`, the job's reference, seed and precision as
JSON on stdin, the inputs saved to PATH as plain tensors. It runs the reference's get_inputs(),
so it is the judge's side: the runner only launches it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def draw(spec: dict[str, Any], path: Path) -> None:
    import torch

    from evaluator.loading import derive_seed, make_init_inputs, make_inputs, module_from_source

    seed = int(spec["seed"])
    reference = module_from_source(str(spec["reference_source"]), "kb_reference")
    init_inputs = make_init_inputs(reference, derive_seed(seed, "init"))
    inputs = make_inputs(reference, derive_seed(seed, "ncu"), "cpu", str(spec["precision"]))
    torch.save({"init_inputs": init_inputs, "inputs": inputs}, path)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m evaluator.judge.ncu_draw PATH", file=sys.stderr)
        return 2
    draw(json.loads(sys.stdin.read()), Path(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
