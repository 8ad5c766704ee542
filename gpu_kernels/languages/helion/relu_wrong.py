# WRONG (a plausible bug), for level1/19_ReLU: a Helion ReLU that thresholds at 0.5 instead of
# 0, so every input in [0, 0.5) becomes 0 instead of itself. With the problem's inputs in
# [0, 1) about half of the outputs are wrong; the judge must report a mismatch. The kernel
# does run (Triton kernel `_helion_relu_kernel`) and writes every output.
import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(config=helion.Config(block_sizes=[4096], num_warps=8))
def relu_kernel(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        v = x[tile]
        out[tile] = torch.where(v > 0.5, v, torch.zeros_like(v))  # bug: threshold 0.5, not 0
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.contiguous().view(-1)
        if flat.numel() == 0:
            return torch.empty_like(x)
        return relu_kernel(flat).view(x.shape)
