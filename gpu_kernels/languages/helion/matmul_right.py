# A tiled Helion matmul in full fp32 for level1/1_Square_matrix_multiplication_: 128 x 128
# output tiles, a K loop of 32-wide tiles accumulating in fp32, grouped tile order (l2 grouping
# 8) so neighbouring programs share tiles in L2. dot_precision="ieee" makes Helion emit
# tl.dot(..., input_precision='ieee'): true fp32, no TF32 (Helion's default follows
# TRITON_F32_DEFAULT, which is tf32). The Triton kernel is `_helion_matmul_kernel`.
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
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, a[tile_m, tile_k], b[tile_k, tile_n])
        out[tile_m, tile_n] = acc
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_kernel(A.contiguous(), B.contiguous())
