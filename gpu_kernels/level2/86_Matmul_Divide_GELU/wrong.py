# SUBTLY WRONG: divides before adding the bias, (x W^T)/d + b instead of (x W^T + b)/d.
# Otherwise the same as right.py: cuBLAS GEMM, then a fused bias/divide/GELU pass.
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void bias_div_gelu_kernel(float* __restrict__ y, const float* __restrict__ bias,
                                     float inv_divisor, int64_t rows, int64_t cols) {
    int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t total = rows * cols;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (; idx < total; idx += stride) {
        float v = y[idx] * inv_divisor + bias[idx % cols];  // the bias escapes the division
        y[idx] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

torch::Tensor bias_div_gelu_(torch::Tensor y, torch::Tensor bias, double divisor) {
    TORCH_CHECK(y.is_cuda() && y.is_contiguous(), "y must be a contiguous CUDA tensor");
    auto b = bias.contiguous();
    int64_t rows = y.size(0), cols = y.size(1);
    int threads = 256;
    int64_t want = (rows * cols + threads - 1) / threads;
    int blocks = (int)(want < 65535 * 8 ? want : 65535 * 8);
    bias_div_gelu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), b.data_ptr<float>(), (float)(1.0 / divisor), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
cpp_source = "torch::Tensor bias_div_gelu_(torch::Tensor y, torch::Tensor bias, double divisor);"

ext = load_inline(name="kb_bias_div_gelu_wrong", cpp_sources=[cpp_source],
                  cuda_sources=[cuda_source],
                  functions=["bias_div_gelu_"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        y = F.linear(x, self.linear.weight)  # the bias is added in the fused pass
        return ext.bias_div_gelu_(y, self.linear.bias, self.divisor)
