# GEMM through cuBLAS (no bias), then one fused Triton pass: add the bias, multiply, LeakyReLU,
# in place on the GEMM's fresh output.
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_scale_leaky_kernel(y_ptr, bias_ptr, n, cols, multiplier, slope, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    b = tl.load(bias_ptr + offsets % cols, mask=mask, other=0.0)
    v = (y + b) * multiplier
    tl.store(y_ptr + offsets, tl.where(v > 0, v, v * slope), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        y = F.linear(x, self.gemm.weight)  # the bias is added in the fused pass
        n = y.numel()
        block = 1024
        bias_scale_leaky_kernel[(triton.cdiv(n, block),)](
            y, self.gemm.bias, n, y.shape[1], self.multiplier, self.negative_slope, BLOCK=block
        )
        return y
