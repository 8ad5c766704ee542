# A pure copy wrapper with a tiny output, for level2/18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp:
# PyTorch computes the whole model (a large GEMM, then reductions down to one value per row) and
# a Triton kernel only copies the (batch, 1) result. Its own kernel's share of the device time is
# about the smallest a kernel that runs can have: the case the backend_share_small note is for.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_flat(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = idx < n
    tl.store(dst_ptr + idx, tl.load(src_ptr + idx, mask=inside), mask=inside)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.linear(x)
        x = torch.sum(x, dim=1, keepdim=True)
        x = torch.max(x, dim=1, keepdim=True)[0]
        x = torch.mean(x, dim=1, keepdim=True)
        x = torch.logsumexp(x, dim=1, keepdim=True)
        x = torch.logsumexp(x, dim=1, keepdim=True).contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        copy_flat[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
