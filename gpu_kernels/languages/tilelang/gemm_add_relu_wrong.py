# WRONG (a plausible bug), for level2/76_Gemm_Add_ReLU: the same as gemm_add_relu_right.py
# (torch.mm, then a TileLang bias + ReLU kernel in place) but the kernel adds the bias twice, so
# every output is off by its column's bias (randn values) wherever the result stays positive.
# Device kernel: `bias_relu_kernel`.
import tilelang
import tilelang.language as T
import torch
import torch.nn as nn


@tilelang.jit
def bias_relu_program(M, N, dtype, block_M=8, block_N=256, threads=256):
    @T.prim_func
    def bias_relu(y: T.Tensor((M, N), dtype), bias: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                row = by * block_M + i
                col = bx * block_N + j
                if row < M and col < N:
                    v = y[row, col] + bias[col] + bias[col]  # BUG: the bias added twice
                    y[row, col] = T.if_then_else(v < 0, T.cast(0, dtype), v)

    return bias_relu


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        # Same parameters, created in the same order as the reference, so the weights match.
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = torch.mm(x, self.gemm.weight.detach().t())  # a new tensor: safe to finish in place
        bias = self.bias.detach().contiguous()
        M, N = y.shape
        kernel = bias_relu_program(M, N, str(y.dtype).removeprefix("torch."))
        kernel(y, bias)  # no out_idx: the kernel writes y in place
        return y
