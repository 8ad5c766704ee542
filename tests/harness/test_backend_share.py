"""backend_not_used is an exploit only where none of the kernel's own kernels ran; own kernels
that ran but do a tiny share of the work are a note (backend_share_small), and a library call
plus an own epilogue is judged correct with no flag and its share reported."""

from __future__ import annotations

from evaluator import flags
from evaluator.judge import exploits
from evaluator.runner.sandbox import run_job

from . import problems as p
from .conftest import make_job

# nn.Linear left to PyTorch (the library GEMM), bias-free, and the bias plus ReLU fused in an
# own Triton kernel (through Triton's interpreter on the CPU).
LIBRARY_PLUS_EPILOGUE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_relu_kernel(y_ptr, b_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    y = tl.load(y_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets % cols, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(y + b, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        y = torch.matmul(x, self.linear.weight.t()).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        bias_relu_kernel[(triton.cdiv(n, 1024),)](y, self.linear.bias, out, n, y.shape[1],
                                                  BLOCK=1024)
        return out
'''


def test_no_own_kernel_run_is_the_exploit_and_a_tiny_share_is_a_note():
    none_ran = exploits.backend_share({"own_calls": 0, "call_host_ms": 5.0, "own_host_ms": 0.0},
                                      "triton", ["k"], on_gpu=False)
    assert none_ran["not_used"] is True and none_ran["minor"] is False
    # A copy kernel after cuBLAS: it ran, on 0.05% of the device time.
    copy = {"own_calls": 1, "device_total_us": 10000.0,
            "device_kernels": [["sm90_xmma_gemm_f32", 9995.0], ["copy_kernel", 5.0]]}
    tiny = exploits.backend_share(copy, "triton", ["copy_kernel"], on_gpu=True)
    assert tiny["not_used"] is False and tiny["minor"] is True
    assert tiny["share"] == 0.0005
    assert flags.backend_share_text(tiny) == "Your Triton kernels do 0.05% of the device time"
    # A fused epilogue doing a real share: neither.
    epilogue = {**copy, "device_kernels": [["sm90_xmma_gemm_f32", 8000.0],
                                           ["bias_relu_kernel", 2000.0]]}
    fused = exploits.backend_share(epilogue, "triton", ["bias_relu_kernel"], on_gpu=True)
    assert (fused["not_used"], fused["minor"], fused["share"]) == (False, False, 0.2)


def test_the_tiny_share_note_is_a_note_and_never_rejects():
    assert flags.is_note("backend_share_small") and flags.is_note("timing_not_reproduced")
    assert "backend_share_small" not in exploits.FLAGS
    assert not set(flags.NOTES) & exploits.REJECTING
    assert flags.exploits(["backend_share_small", "backend_not_used", "timing_not_reproduced"]) \
        == ["backend_not_used"]
    assert "(note)" in exploits.describe_flags(["backend_share_small"])


def test_a_library_gemm_with_an_own_triton_epilogue_is_correct_unflagged_with_its_share():
    result = run_job(make_job(p.LINEAR_RELU, LIBRARY_PLUS_EPILOGUE, backend="triton",
                              time_limit_s=180, measure=True))
    assert result["verdict"] == "correct", result["error"]
    assert [f for f in result["flags"] if f != "timing_unconfirmed"] == []
    report = result["checks"]["backend"]
    assert report["own_calls"] >= 1 and report["not_used"] is False
    assert report["basis"] == "host time" and 0 < report["share"] <= 1
    assert flags.backend_share_text(report).startswith("Your Triton kernels do ")
