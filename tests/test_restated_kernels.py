"""The sharing bench's PyTorch kernels of level-2 GEMM problems (bench/kernels/restated.py): the
right one computes what the problem's Model does, the wrong one does not, and the problems are
KernelBench's GEMMs without dropout's random draws."""

from pathlib import Path

import pytest
import torch

from bench.kernels.restated import gemm_problems, write_restated
from tests.conftest import KERNELBENCH

TINY = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n, m):
        super().__init__()
        self.linear = nn.Linear(n, m)

    def forward(self, x):
        return torch.relu(self.linear(x)) / 2

def get_inputs():
    return [torch.rand(4, 16)]

def get_init_inputs():
    return [16, 8]
'''


def _model_new(path: str, init: list):
    scope: dict = {"__name__": "candidate"}
    exec(compile(Path(path).read_text(), path, "exec"), scope)
    torch.manual_seed(3)
    model = scope["Model"](*init)
    torch.manual_seed(3)
    return model, scope["ModelNew"](*init)


def test_a_restated_kernel_is_right_and_every_fourth_is_wrong(tmp_path: Path):
    problems = tmp_path / "kb" / "level2"
    problems.mkdir(parents=True)
    for number in range(1, 5):
        (problems / f"{number}_Gemm_Tiny.py").write_text(TINY)
    mix = write_restated(tmp_path / "kernels", tmp_path / "kb", 4)
    assert [Path(k).name.endswith("_wrong.py") for _, k, _ in mix] == [False, False, False, True]
    assert {b for *_, b in mix} == {"torch"}
    x = torch.rand(4, 16)
    for _, kernel, _ in mix:
        model, new = _model_new(kernel, [16, 8])
        shift = 0.125 if kernel.endswith("_wrong.py") else 0.0
        torch.testing.assert_close(new(x), model(x) + shift)


@pytest.mark.skipif(not (KERNELBENCH / "level2").is_dir(),
                    reason="needs the KernelBench problem set")
def test_the_problems_are_kernelbenchs_level2_gemms_without_dropout():
    problems = gemm_problems(KERNELBENCH)
    assert len(problems) >= 30
    assert all(p.startswith("level2/") and "Dropout" not in p for p in problems)
    assert [int(Path(p).name.split("_")[0]) for p in problems] == sorted(
        int(Path(p).name.split("_")[0]) for p in problems)
