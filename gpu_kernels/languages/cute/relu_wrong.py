# WRONG (a plausible bug), for level1/19_ReLU: the CuTe DSL ReLU compares against 0.5 instead
# of 0, so every input in [0, 0.5) becomes 0 where ReLU keeps it (about half of the problem's
# inputs, drawn from [0, 1)). Everything else is as in relu_right.py: every output is written.
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

THREADS = 256  # threads per block, pinned
THRESHOLD = 0.5  # the bug: ReLU's threshold is 0


@cute.kernel
def relu_kernel(x: cute.Tensor, out: cute.Tensor, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * THREADS + tidx
    if i < n:
        v = x[i]
        r = cutlass.Float32(0.0)
        if v > THRESHOLD:
            r = v
        out[i] = r


@cute.jit
def relu_launch(x: cute.Tensor, out: cute.Tensor, n: cutlass.Int32, stream: cuda.CUstream):
    blocks = (n + THREADS - 1) // THREADS
    relu_kernel(x, out, n).launch(grid=[blocks, 1, 1], block=[THREADS, 1, 1], stream=stream)


_compiled = {}  # (dtype, size) -> the compiled launcher


def relu(x: torch.Tensor) -> torch.Tensor:
    flat = x.contiguous().view(-1)
    out = torch.empty_like(flat)
    n = flat.numel()
    if n >= 2**31:
        raise ValueError("relu_kernel indexes with 32-bit integers")
    if n:
        src, dst = from_dlpack(flat), from_dlpack(out)
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)  # torch's stream
        key = (flat.dtype, n)
        if key not in _compiled:
            _compiled[key] = cute.compile(relu_launch, src, dst, n, stream)
        _compiled[key](src, dst, n, stream)
    return out.view(x.shape)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu(x)
