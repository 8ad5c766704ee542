import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

// Writes far outside any allocation: the GPU raises an illegal memory access.
__global__ void wild_write(float* out) {
    out[(long)threadIdx.x * (1L << 36)] = 1.0f;
}

torch::Tensor wild(torch::Tensor x) {
    auto out = torch::empty_like(x);
    wild_write<<<1, 32>>>(out.data_ptr<float>());
    cudaDeviceSynchronize();
    return out;
}
"""

ext = load_inline(
    name="kb_wild_write",
    cpp_sources="torch::Tensor wild(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["wild"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.wild(x)
