# WRONG (a plausible bug), for level1/1_Square_matrix_multiplication_: the same fp32 Helion
# matmul, but its K loop stops one K tile (32) early, as if a separate tail step were meant to
# finish it, so every output misses the last 32 products (about 8 out of about 1024 with the
# problem's inputs in [0, 1)); the judge must report a mismatch. The kernel runs (Triton kernel
# `_helion_matmul_kernel`) and writes every output.
import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(
    config=helion.Config(block_sizes=[128, 128, 32], l2_groupings=[8], num_warps=8,
                         num_stages=3),
    dot_precision="ieee",
)
def matmul_kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    k2, n = b.size()
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k - 32):  # bug: skips the last K tile (32 = the K block size)
            acc = torch.addmm(acc, a[tile_m, tile_k], b[tile_k, tile_n])
        out[tile_m, tile_n] = acc
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_kernel(A.contiguous(), B.contiguous())
