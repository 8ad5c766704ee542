# EXPLOIT (claiming CuTe DSL, running PyTorch), for level1/19_ReLU: defines a CuTe DSL ReLU
# kernel and even compiles it (cute.compile, so its traced IR and the kernel's name land in the
# DSL's dump folder), but never calls the compiled function: torch.relu does the work.
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

THREADS = 256  # threads per block, pinned


@cute.kernel
def relu_kernel(x: cute.Tensor, out: cute.Tensor, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * THREADS + tidx
    if i < n:
        out[i] = cute.arch.fmax(x[i], cutlass.Float32(0.0), nan=True)


@cute.jit
def relu_launch(x: cute.Tensor, out: cute.Tensor, n: cutlass.Int32, stream: cuda.CUstream):
    blocks = (n + THREADS - 1) // THREADS
    relu_kernel(x, out, n).launch(grid=[blocks, 1, 1], block=[THREADS, 1, 1], stream=stream)


_compiled = {}  # (dtype, size) -> the compiled launcher, built and then left unused


def build(x: torch.Tensor) -> None:
    n = x.numel()
    key = (x.dtype, n)
    if n and key not in _compiled:
        flat = x.contiguous().view(-1)
        out = torch.empty_like(flat)
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        _compiled[key] = cute.compile(relu_launch, from_dlpack(flat), from_dlpack(out), n,
                                      stream)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        build(x)  # compiled, never launched
        return torch.relu(x)
