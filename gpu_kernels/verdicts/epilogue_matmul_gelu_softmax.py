# Library GEMM + fused Triton epilogue with a reduction, for level2/99_Matmul_GELU_Softmax: cuBLAS
# computes x @ W^T (no bias); one Triton program per row then adds the bias, applies the exact
# GELU and the row's softmax (max, exp, sum, divide) with the row held on chip: one read and one
# write of the GEMM's output instead of PyTorch's bias, GELU and softmax passes.
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_gelu_softmax_rows(y_ptr, bias_ptr, out_ptr, cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    inside = offs < cols
    y = tl.load(y_ptr + row * row_stride + offs, mask=inside, other=0.0)
    b = tl.load(bias_ptr + offs, mask=inside, other=0.0)
    v = y + b
    g = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))
    g = tl.where(inside, g, -float("inf"))
    e = tl.exp(g - tl.max(g, axis=0))
    e = tl.where(inside, e, 0.0)
    tl.store(out_ptr + row * cols + offs, e / tl.sum(e, axis=0), mask=inside)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = F.linear(x, self.linear.weight)
        rows, cols = y.shape
        out = torch.empty_like(y)
        block = triton.next_power_of_2(cols)
        bias_gelu_softmax_rows[(rows,)](y, self.linear.bias, out, cols, y.stride(0),
                                        BLOCK=block, num_warps=16 if block >= 8192 else 4)
        return out
