# A pure copy wrapper, for level2/76_Gemm_Add_ReLU: PyTorch computes the whole model and a Triton
# kernel only copies its result into a fresh tensor. Its own kernel runs and its output reaches
# the result, but it does none of the model's work: it must never rank above the plain PyTorch
# reference (it is slower by the copy; with an own-kernel share under 0.1% the
# backend_share_small note caps it at the reference).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_flat(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = idx < n
    tl.store(dst_ptr + idx, tl.load(src_ptr + idx, mask=inside), mask=inside)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = torch.relu(self.gemm(x) + self.bias).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        copy_flat[(triton.cdiv(n, 4096),)](y, out, n, BLOCK=4096)
        return out
