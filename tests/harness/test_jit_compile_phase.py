"""The JIT languages (Triton, Helion, TileLang, CuTe DSL, cuTile) compile on a kernel's first
call, inside the first correctness trial: that call's time is the compile phase where the
language's cache in the build slot grew during it, and correctness keeps only the rest.

These run a real sandboxed worker (run_job): the cache folders are the ones the sandbox gives
the worker, which only a real run shows."""

from __future__ import annotations

import pytest

from evaluator.runner.sandbox import run_job

from . import problems as p
from .conftest import make_job

# A stand-in for a JIT compile: the first call writes into Triton's cache folder and takes a
# second doing it, as a compiler would; later calls do neither.
FILLS_THE_CACHE = '''
import os, time
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    calls = 0

    def forward(self, x):
        ModelNew.calls += 1
        if ModelNew.calls == 1:
            folder = os.environ["TRITON_CACHE_DIR"]
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "relu.cubin"), "w") as f:
                f.write("built")
            time.sleep(1.0)
        return torch.relu(x)
'''

# A slow first call that compiles nothing: its time stays in correctness.
SLOW_FIRST_CALL = '''
import time
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    calls = 0

    def forward(self, x):
        ModelNew.calls += 1
        if ModelNew.calls == 1:
            time.sleep(1.0)
        return torch.relu(x)
'''


def test_a_first_call_that_fills_a_jit_cache_counts_as_compile_time_not_correctness(tmp_path):
    result = run_job(make_job(p.RELU, FILLS_THE_CACHE, build_dir=str(tmp_path)))
    assert result["verdict"] == "correct", result["error"]
    assert result["compile"]["jit_s"] >= 1.0
    assert result["phases"]["compile"] >= 1.0
    assert result["phases"]["correctness"] < 1.0


def test_a_slow_first_call_that_compiles_nothing_stays_in_correctness(tmp_path):
    result = run_job(make_job(p.RELU, SLOW_FIRST_CALL, build_dir=str(tmp_path)))
    assert result["verdict"] == "correct", result["error"]
    assert "jit_s" not in result["compile"]
    assert result["phases"]["compile"] == 0.0
    assert result["phases"]["correctness"] >= 1.0


@pytest.mark.gpu
def test_a_triton_kernels_first_compile_is_its_compile_phase_and_a_warm_one_has_none(tmp_path):
    first = run_job(make_job(p.RELU, p.TRITON_RELU, backend="triton", device="cuda",
                             build_dir=str(tmp_path)))
    assert first["verdict"] == "correct", first["error"] + first["traceback"]
    assert first["compile"]["jit_s"] > 0
    assert first["phases"]["compile"] == pytest.approx(first["compile"]["jit_s"], abs=1e-3)
    warm = run_job(make_job(p.RELU, p.TRITON_RELU, backend="triton", device="cuda",
                            build_dir=str(tmp_path), seed=7))
    assert warm["verdict"] == "correct", warm["error"]
    assert "jit_s" not in warm["compile"] and warm["phases"]["compile"] == 0.0
