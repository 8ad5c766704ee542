# SUBTLY WRONG: sqrt(2/pi) = 0.79788... truncated to 0.79 (the error peaks near x = 1, ~2e-3).

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def new_gelu_kernel(x_ptr, out_ptr, n, SQRT_2_OVER_PI: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    z = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    # tanh(z) = 1 - 2 / (exp(2z) + 1): exact at both ends (exp overflow gives 1, underflow -1).
    t = 1.0 - 2.0 / (tl.exp(2.0 * z) + 1.0)
    tl.store(out_ptr + offsets, 0.5 * x * (1.0 + t), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        block = 1024
        new_gelu_kernel[(triton.cdiv(n, block),)](
            x, out, n, SQRT_2_OVER_PI=0.79, BLOCK=block
        )
        return out
