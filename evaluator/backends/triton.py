"""Triton kernels (@triton.jit): compiled for the GPU, or run by Triton's interpreter on a CPU."""

from evaluator.backends import Backend

STARTER = """\
import torch
import triton
import triton.language as tl


@triton.jit
def pass_through_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n  # the tail: the last block may reach past the end
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x, mask=mask)  # your computation, a block at a time


def pass_through(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        BLOCK = 1024
        pass_through_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out
"""

BACKEND = Backend(
    name="triton",
    label="Triton",
    summary="custom Triton kernels (@triton.jit)",
    packages=("torch", "triton"),
    cpu_env={"TRITON_INTERPRET": "1"},  # triton kernels run on the CPU through its interpreter
    # The static report also takes any decorator under `triton.` and a bare jit, autotune or
    # heuristics as Triton's (static_report._TRITON_BARE), once no other backend's matched.
    decorators=("triton.jit", "triton.autotune", "triton.heuristics"),
    own_kernels=("triton",),
    evidence="triton",
    starter_kernel=STARTER,
)
