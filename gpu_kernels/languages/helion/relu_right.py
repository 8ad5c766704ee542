# Helion ReLU for level1/19_ReLU: the input is flattened to one dimension so that one pinned
# config (one block size) fits every shape; each tile computes max(x, 0). Helion compiles the
# kernel `relu_kernel` to the Triton kernel `_helion_relu_kernel` (compiled once per shape and
# cached by Helion; launched on torch's current stream).
import helion
import helion.language as hl
import torch
import torch.nn as nn


# One pinned config: Helion does not autotune a kernel that has exactly one.
@helion.kernel(config=helion.Config(block_sizes=[4096], num_warps=8))
def relu_kernel(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):  # one program per tile, the tail masked
        out[tile] = torch.relu(x[tile])
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.contiguous().view(-1)
        if flat.numel() == 0:
            return torch.empty_like(x)
        return relu_kernel(flat).view(x.shape)
