# WRONG (a plausible bug), for level2/76_Gemm_Add_ReLU: the same cuBLAS GEMM and Helion
# bias + ReLU epilogue, but the epilogue adds the bias twice (y + bias + bias), so every
# output whose bias is not 0 is off by the bias; the judge must report a mismatch. The kernel
# runs (Triton kernel `_helion_bias_relu_kernel`) and writes every output.
import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(config=helion.Config(block_sizes=[32, 256], num_warps=8))
def bias_relu_kernel(y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, n = y.size()
    for tile_m, tile_n in hl.tile([m, n]):
        b = bias[tile_n][None, :]
        y[tile_m, tile_n] = torch.relu(y[tile_m, tile_n] + b + b)  # bug: bias added twice
    return y


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        # Same parameters, created in the same order as the reference, so the weights match.
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = torch.mm(x, self.gemm.weight.t())
        return bias_relu_kernel(y, self.bias.contiguous())
