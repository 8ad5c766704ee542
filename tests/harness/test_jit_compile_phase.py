"""The JIT languages (Triton, Helion, TileLang, CuTe DSL, cuTile) compile on a kernel's first
call, inside the first correctness trial: that call's time is the compile phase where the
language's cache in the build slot grew during it, and correctness keeps only the rest.

These run a real sandboxed worker (run_job): the cache folders are the ones the sandbox gives
the worker, which only a real run shows."""

from __future__ import annotations

import math

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


# The worker's replies are the candidate's to forge: a seconds figure it reports is a number the
# judge bounds, never one that can end the evaluation (a forged 10**400 once made the judge's
# float() raise, and the kernel's result a harness_error).
FORGED = ["10**400", "-10**400", "float('nan')", "float('inf')", "-5", "True", "'12'", "[1]",
          "None"]

FORGES_JIT_S = '''
import torch
import torch.nn as nn
import evaluator.worker.base as base

_run = base.Worker.run

def _forged(self, inputs):
    header, value = _run(self, inputs)
    header["jit_s"] = VALUE
    return header, value

base.Worker.run = _forged

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''

FORGES_COMPILE_S = '''
import torch
import torch.nn as nn
import evaluator.protocol as protocol

_send = protocol.Channel.send

def _forged(self, header, value=None):
    if isinstance(header, dict) and "compile_s" in header:
        header["compile_s"] = VALUE
    return _send(self, header, value)

protocol.Channel.send = _forged

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''


@pytest.mark.parametrize("template", [FORGES_JIT_S, FORGES_COMPILE_S],
                         ids=["jit_s", "compile_s"])
@pytest.mark.parametrize("value", FORGED)
def test_a_forged_seconds_figure_in_a_reply_is_bounded_and_never_ends_the_evaluation(
        template, value):
    result = run_job(make_job(p.RELU, template.replace("VALUE", value)))
    assert result["verdict"] == "correct", (result["verdict"], result["error"])
    for phase in ("compile", "correctness"):
        seconds = result["phases"][phase]
        assert isinstance(seconds, float) and math.isfinite(seconds) and 0 <= seconds < 60
