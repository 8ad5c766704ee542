"""The sharing bench's own kernels for KernelBench's elementwise problems (bench/kernels/
activations.py): right ones match the problem's reference, wrong ones do not, on small inputs
(the references are KernelBench's, checked against its files where the problem set is at hand).
The PyTorch ones run here; the Triton ones through Triton's interpreter in a process of their
own (the interpreter is chosen at import); the CUDA ones' device code through nvcc (this host
cannot run it: the GPU check does)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.kernels.activations import (
    ACTIVATIONS,
    BACKENDS,
    kernel_source,
    references,
    write_mix,
)
from tests.conftest import KERNELBENCH, REPO

REFERENCES = references()
needs_kernelbench = pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(),
                                       reason="needs the KernelBench problem set")


def _load(source: str, name: str):
    scope: dict = {"__name__": name}
    exec(compile(source, name, "exec"), scope)
    return scope


def _reference(problem_file: str):
    scope = _load((KERNELBENCH / problem_file).read_text(), problem_file)
    return scope["Model"](*scope["get_init_inputs"]())


def _small_input() -> torch.Tensor:
    # KernelBench draws torch.rand: [0, 1); a few negatives cover the other branch too.
    return torch.cat([torch.rand(4, 63), -torch.rand(1, 63)])


@needs_kernelbench
@pytest.mark.parametrize("problem", list(ACTIVATIONS))
def test_each_reference_here_is_the_kernelbench_problems_at_its_real_size(problem):
    x = _small_input()
    torch.testing.assert_close(REFERENCES[problem](x), _reference(problem)(x))
    assert "393216" in (KERNELBENCH / problem).read_text()  # 6 GiB a tensor


def test_the_mix_covers_every_problem_in_each_backend_with_one_wrong_kernel_each(tmp_path):
    mix = write_mix(tmp_path)
    assert len(mix) == 4 * len(ACTIVATIONS) and len(ACTIVATIONS) >= 8
    assert len({Path(k).read_text() for _, k, _ in mix}) == len(mix)  # no source twice
    for problem in ACTIVATIONS:
        kernels = [Path(k).name for p, k, _ in mix if p == problem]
        assert sorted(b for p, _, b in mix if p == problem) == sorted([*BACKENDS, "triton"])
        assert sum("wrong" in k for k in kernels) == 1
    assert set(REFERENCES) == set(ACTIVATIONS)


def test_in_pairs_each_problem_has_one_right_and_one_wrong_kernel_and_each_backend_both(
        tmp_path):
    mix = write_mix(tmp_path, 8, pairs=True)
    assert len(mix) == 16 and len({p for p, _, _ in mix}) == 8
    for problem in {p for p, _, _ in mix}:
        kinds = sorted("wrong" in Path(k).name for p, k, _ in mix if p == problem)
        assert kinds == [False, True]
    for backend in BACKENDS:
        assert {"wrong" in Path(k).name for _, k, b in mix if b == backend} == {False, True}


@pytest.mark.parametrize("problem", list(ACTIVATIONS))
def test_the_pytorch_kernels_are_right_and_the_wrong_ones_wrong(problem):
    x = _small_input()
    expected = REFERENCES[problem](x)
    right = _load(kernel_source(problem, "torch"), "right")["ModelNew"](1.0)
    wrong = _load(kernel_source(problem, "torch", wrong=True), "wrong")["ModelNew"]()
    torch.testing.assert_close(right(x), expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(wrong(x), expected, atol=1e-2, rtol=1e-2)


_INTERPRETED = """
import json, sys, torch
from bench.kernels.activations import ACTIVATIONS, kernel_source, references
REFERENCES = references()
out = {}
for problem in ACTIVATIONS:
    x = torch.cat([torch.rand(4, 63), -torch.rand(1, 63)])
    expected = REFERENCES[problem](x)
    errors = []
    for wrong, block in ((False, 4096), (True, 4096), (False, 1024)):
        scope = {"__name__": "k"}
        exec(compile(kernel_source(problem, "triton", wrong=wrong, block=block), problem,
                     "exec"), scope)
        errors.append(float((scope["ModelNew"]()(x) - expected).abs().max()))
    out[problem] = errors
print(json.dumps(out))
"""


def test_the_triton_kernels_are_right_and_the_wrong_ones_wrong_in_the_interpreter():
    """Needs a process of its own: Triton reads TRITON_INTERPRET when it is imported."""
    done = subprocess.run([sys.executable, "-c", _INTERPRETED], cwd=REPO,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    errors = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(errors) == set(ACTIVATIONS)
    for problem, (right, wrong, small_blocks) in errors.items():
        assert right < 1e-5 and small_blocks < 1e-5, problem
        assert wrong > 0.1, problem


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_cuda_kernels_device_code_compiles(tmp_path):
    """Needs nvcc (a process): each kernel's device code, without torch's headers."""
    units = []
    for index, problem in enumerate(ACTIVATIONS):
        for wrong in (False, True):
            source = kernel_source(problem, "cuda", wrong=wrong)
            device = source.split('r"""', 1)[1].split("torch::Tensor forward", 1)[0]
            device = device.replace("#include <torch/extension.h>", "")
            # One translation unit: each kernel's helper and kernels renamed apart.
            units.append(re.sub(r"\bact\b", f"act_{index}_{int(wrong)}", device))
    (tmp_path / "all.cu").write_text("\n".join(units))
    done = subprocess.run(["nvcc", "-c", "-o", str(tmp_path / "all.o"), str(tmp_path / "all.cu")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
