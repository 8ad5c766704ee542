# FAULT: a GPU kernel that writes 4 TiB past the end of its output: an illegal memory access.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(a_ptr, b_ptr, out_ptr, cols, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    b = tl.load(b_ptr + offsets, mask=mask)
    a = tl.load(a_ptr + offsets // cols, mask=mask)
    tl.store(out_ptr + offsets + (1 << 40), a * b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        out = torch.empty_like(B)
        n = B.numel()
        scale_kernel[(triton.cdiv(n, 1024),)](A, B, out, B.shape[1], n, BLOCK=1024)
        return out
