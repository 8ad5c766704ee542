# FAULT: a GPU kernel that spins forever on a flag nobody sets: only the wall-clock limit ends it.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def spin_kernel(flag_ptr):
    value = tl.load(flag_ptr)
    while value == 0:
        value = tl.load(flag_ptr, volatile=True)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        flag = torch.zeros(1, dtype=torch.int32, device=A.device)
        spin_kernel[(1,)](flag)
        torch.cuda.synchronize()
        return A.unsqueeze(1) * B
