"""The harness on a CUDA device (skipped without one): CUDA and native Triton kernels, GPU
faults, and the build cache for CUDA extensions."""

from __future__ import annotations

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
