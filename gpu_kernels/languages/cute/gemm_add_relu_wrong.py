# WRONG (a plausible bug), for level2/76_Gemm_Add_ReLU: as gemm_add_relu_right.py (cuBLAS GEMM,
# then a CuTe DSL bias + ReLU kernel in place), but the kernel adds the bias twice, so every
# output before the ReLU is off by the bias (drawn from randn: most outputs are wrong).
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

THREADS = 256  # threads per block, pinned


@cute.kernel
def bias_relu_kernel(y: cute.Tensor, bias: cute.Tensor, total: cutlass.Int32):
    cols = bias.shape[0]  # static: one compile per shape
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * THREADS + tidx
    if i < total:
        v = y[i] + bias[i % cols]
        v = v + bias[i % cols]  # the bug: the bias again
        y[i] = cute.arch.fmax(v, cutlass.Float32(0.0), nan=True)


@cute.jit
def bias_relu_launch(y: cute.Tensor, bias: cute.Tensor, total: cutlass.Int32,
                     stream: cuda.CUstream):
    blocks = (total + THREADS - 1) // THREADS
    bias_relu_kernel(y, bias, total).launch(grid=[blocks, 1, 1], block=[THREADS, 1, 1],
                                            stream=stream)


_compiled = {}  # (dtype, rows, cols) -> the compiled launcher


def bias_relu_(y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """y (rows x cols, contiguous) = relu(y + bias), in place."""
    rows, cols = y.shape
    total = rows * cols
    if total >= 2**31:
        raise ValueError("bias_relu_kernel indexes with 32-bit integers")
    if total:
        # detached views of the same storage: DLPack exports no tensor that requires grad
        ty = from_dlpack(y.detach().view(-1))
        tb = from_dlpack(bias.detach().contiguous())
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)  # torch's stream
        key = (y.dtype, rows, cols)
        if key not in _compiled:
            _compiled[key] = cute.compile(bias_relu_launch, ty, tb, total, stream)
        _compiled[key](ty, tb, total, stream)
    return y


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        # Same parameters, created in the same order as the reference, so the weights match.
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = torch.mm(x, self.gemm.weight.t())  # a new contiguous tensor: safe to finish in place
        return bias_relu_(y, self.bias)
