# level2/76_Gemm_Add_ReLU: the GEMM through cuBLAS (torch.mm, fp32, no bias), then one Helion
# kernel adds the bias and applies ReLU in place on the GEMM's fresh output, in 2-D tiles (the
# bias indexed by the column tile). The Triton kernel is `_helion_bias_relu_kernel`.
import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(config=helion.Config(block_sizes=[32, 256], num_warps=8))
def bias_relu_kernel(y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, n = y.size()
    for tile_m, tile_n in hl.tile([m, n]):
        y[tile_m, tile_n] = torch.relu(y[tile_m, tile_n] + bias[tile_n][None, :])
    return y


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        # Same parameters, created in the same order as the reference, so the weights match.
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = torch.mm(x, self.gemm.weight.t())  # a new tensor: safe to finish in place
        return bias_relu_kernel(y, self.bias.contiguous())
