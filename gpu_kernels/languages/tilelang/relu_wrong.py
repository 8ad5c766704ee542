# WRONG (a plausible bug), for level1/19_ReLU: the same TileLang kernel as relu_right.py but the
# threshold is 0.5 instead of 0, so every input in [0, 0.5) comes out as 0 instead of itself: on
# the problem's inputs (uniform in [0, 1)) about half of the outputs are wrong. Every output is
# still written. Device kernel: `relu_kernel`.
import tilelang
import tilelang.language as T
import torch
import torch.nn as nn


@tilelang.jit(out_idx=[-1])
def relu_program(n, dtype, block=2048, threads=256):
    @T.prim_func
    def relu(x: T.Tensor((n,), dtype), out: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            tile = T.alloc_fragment((block,), dtype)
            T.copy(x[bx * block], tile)
            for i in T.Parallel(block):
                # BUG: the threshold should be 0, not 0.5.
                tile[i] = T.if_then_else(tile[i] < T.cast(0.5, dtype), T.cast(0, dtype), tile[i])
            T.copy(tile, out[bx * block])

    return relu


def relu(x: torch.Tensor) -> torch.Tensor:
    flat = x.contiguous().view(-1)
    if flat.numel() == 0:
        return torch.empty_like(x)
    kernel = relu_program(flat.numel(), str(flat.dtype).removeprefix("torch."))
    return kernel(flat).view(x.shape)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu(x)
