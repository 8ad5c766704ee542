"""The harness on a CUDA device (skipped without one): CUDA and native Triton kernels, GPU
faults, and the build cache for CUDA extensions."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.runner.sandbox import run_job

from . import problems as p
from .conftest import make_job

pytestmark = pytest.mark.gpu


def gpu_job(reference: str, candidate: str, **overrides) -> dict:
    return make_job(reference, candidate, device="cuda", **overrides)


@pytest.fixture(scope="module")
def cuda_first_run(build_dir: str) -> dict:
    return run_job(gpu_job(p.RELU, p.CUDA_RELU, backend="cuda", build_dir=build_dir,
                           measure=True, time_limit_s=400))


def test_a_right_cuda_kernel_is_correct_and_timed_on_the_gpu(cuda_first_run: dict):
    result = cuda_first_run
    assert result["verdict"] == "correct", result["error"] + result["compile_log"]
    assert result["compile"]["compiled"] is True
    assert result["environment"]["arch"].startswith("sm_")
    assert result["candidate"]["n"] >= 5 and result["reference"]["n"] >= 5
    assert "timing_underreported" not in result["flags"]


def test_re_evaluating_a_compiled_cuda_kernel_spends_no_time_compiling(
    cuda_first_run: dict, build_dir: str
):
    assert cuda_first_run["verdict"] == "correct"
    again = run_job(gpu_job(p.RELU, p.CUDA_RELU, backend="cuda", build_dir=build_dir))
    assert again["verdict"] == "correct", again["error"]
    assert again["compile"]["cache_hit"] is True and again["phases"]["compile"] == 0.0


def test_an_illegal_memory_access_is_a_runtime_error_and_the_next_run_works(build_dir: str):
    bad = run_job(gpu_job(p.RELU, p.CUDA_RELU_ILLEGAL_ACCESS, backend="cuda",
                          build_dir=build_dir, time_limit_s=400))
    assert bad["verdict"] == "runtime_error", bad["error"]
    assert "illegal memory access" in bad["error"].lower()
    good = run_job(gpu_job(p.RELU, p.RELU.replace("class Model(", "class ModelNew(")))
    assert good["verdict"] == "correct", good["error"]


def test_allocating_until_the_gpu_is_full_is_out_of_memory():
    hoard = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        blocks = []
        while True:
            blocks.append(torch.empty(2**31, device=x.device))
"""
    result = run_job(gpu_job(p.RELU, hoard))
    assert result["verdict"] == "out_of_memory", result["error"]


def test_a_native_triton_kernel_is_correct_and_a_wrong_one_incorrect():
    right = run_job(gpu_job(p.RELU, p.TRITON_RELU, backend="triton", measure=True))
    assert right["verdict"] == "correct", right["error"] + right["traceback"]
    wrong = run_job(gpu_job(p.RELU, p.TRITON_RELU_MISSES_TAIL, backend="triton"))
    assert wrong["verdict"] == "incorrect"


def test_bf16_precision_runs_models_in_bf16_with_the_bf16_tolerance():
    same = p.LINEAR_RELU.replace("class Model(", "class ModelNew(")
    result = run_job(gpu_job(p.LINEAR_RELU, same, precision="bf16"))
    assert result["verdict"] == "correct", result["error"]
    assert result["tolerance"] == {"atol": 1e-2, "rtol": 1e-2}


def test_a_models_weights_are_drawn_on_the_gpu_alike_for_model_and_modelnew():
    """In-process, then in real processes: the judge's reference and the worker's candidate
    draw their weights from the device's generator under the same seed (loading.build_model),
    and a right kernel of a model with weights is still correct."""
    import torch

    from evaluator.loading import build_model, module_from_source

    ref = module_from_source(p.LINEAR_RELU, "kb_gpu_ref")
    cand = module_from_source(p.LINEAR_RELU_RIGHT, "kb_gpu_cand")
    m1 = build_model(ref.Model, [16], 99, "cuda", "fp32")
    m2 = build_model(cand.ModelNew, [16], 99, "cuda", "fp32")
    assert m1.linear.weight.is_cuda and torch.equal(m1.linear.weight, m2.linear.weight)
    on_cpu = build_model(ref.Model, [16], 99, "cpu", "fp32")
    assert not torch.equal(on_cpu.linear.weight, m1.linear.weight.cpu()), "drawn on the device"
    result = run_job(gpu_job(p.LINEAR_RELU, p.LINEAR_RELU_RIGHT, measure=True))
    assert result["verdict"] == "correct", result["error"]


CONV = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return self.conv(x)

def get_inputs():
    return [torch.randn(16, 64, 64, 64)]

def get_init_inputs():
    return [64, 128, 3]
'''

# Honest: the same convolution through cuDNN, choosing its algorithm anew on alternate calls
# (benchmarking, then the heuristic), as a library that picks by the memory it finds does;
# its numerics move between calls as the reference's own do (issue 61: such a kernel was
# rejected timed_output_incorrect on a shared H100).
CONV_ALGORITHMS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        torch.backends.cudnn.benchmark = self.calls % 2 == 0
        return F.conv2d(x, self.conv.weight, self.conv.bias)
'''


def test_a_convolution_whose_cudnn_algorithm_changes_between_calls_is_correct_and_ranks():
    result = run_job(gpu_job(CONV, CONV_ALGORITHMS, measure=True, time_limit_s=300))
    assert result["verdict"] == "correct", (result["error"], result["flags"])
    assert "timed_output_incorrect" not in result["flags"], result["checks"].get("timed_calls")


# A call of about 50 us on the device (issue 61's GPU figure for the judge's clock): the
# device spins for a fixed number of cycles (torch.cuda._sleep), then the ReLU of a small
# input; `HALVES` also replaces the worker's timer on the instance with one that reports
# every call at half its time.
SLEEP_CYCLES = 90_000  # 45 to 55 us at the 1.6 to 2 GHz these cards run at
FIFTY_US = f'''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        torch.cuda._sleep({SLEEP_CYCLES})
        return torch.relu(x)
'''
# The CPU suite's kernel (one corpus), its half-millisecond spin replaced by the device's.
_SPIN = """        end = time.perf_counter() + 0.0005
        while time.perf_counter() < end:
            pass
"""
HALVES = (Path(__file__).parents[1] / "exploits" / "kernels" / "halves_a_half_ms_call.py"
          ).read_text()
assert _SPIN in HALVES
HALVES = HALVES.replace(_SPIN, f"        torch.cuda._sleep({SLEEP_CYCLES})\n")
FIFTY_US_TIMING = {"warmup": 5, "min_reps": 40, "max_reps": 200, "target_rel_err": 0.002,
                   "max_seconds": 2.0, "sets": 3}


@pytest.fixture(scope="module")
def fifty_us() -> dict:
    return run_job(gpu_job(p.RELU, FIFTY_US, measure=True, timing=FIFTY_US_TIMING))


def test_an_honest_50_us_call_ranks_within_five_percent_of_its_own_figure(fifty_us: dict):
    result = fifty_us
    assert result["verdict"] == "correct", (result["error"], result["flags"])
    clock = result["timing_detail"]["judge_clock"]
    reported, ranked = clock["reported_block_ms"], result["candidate"]["median_ms"]
    assert 0.03 < reported < 0.08, clock
    assert clock["confirmed"], clock
    assert abs(ranked / reported - 1) <= 0.05, clock
    # The judge's own figure for so short a call is resolved only coarsely: on an H100 it read
    # 0.036 ms against the worker's 0.051 (the call's interval through the channel, with two
    # L2 flushes, is about 0.45 ms). It bounds a forged report, never the honest one's rank.
    assert 0.5 <= clock["judge_ms"] / reported <= 1.5, clock


def test_a_worker_timer_reporting_half_of_a_50_us_call_does_not_halve_the_ranked_time(
        fifty_us: dict):
    result = run_job(gpu_job(p.RELU, HALVES, measure=True, timing=FIFTY_US_TIMING))
    honest = fifty_us["timing_detail"]["judge_clock"]["reported_block_ms"]
    clock = result["timing_detail"]["judge_clock"]
    # Caught: it ranks at no less than the judge measured (whether its report is also named
    # unconfirmed depends on how the host's noise widened the tolerance that run).
    assert result["candidate"]["median_ms"] >= 0.9 * honest, (honest, clock)
