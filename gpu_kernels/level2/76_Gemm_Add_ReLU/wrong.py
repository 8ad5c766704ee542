# SUBTLY WRONG: adds bias[row] instead of bias[col] (rows < cols, so nothing overflows).
# Otherwise the same as right.py: cuBLAS GEMM, then a fused bias + ReLU pass.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void bias_relu_kernel(float* __restrict__ y, const float* __restrict__ bias,
                                 int64_t rows, int64_t cols) {
    int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t total = rows * cols;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (; idx < total; idx += stride) {
        int64_t col = idx / cols;  // the row's index: bias[row] instead of bias[col]
        float v = y[idx] + bias[col];
        y[idx] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor bias_relu_(torch::Tensor y, torch::Tensor bias) {
    TORCH_CHECK(y.is_cuda() && y.is_contiguous(), "y must be a contiguous CUDA tensor");
    auto b = bias.contiguous();
    int64_t rows = y.size(0), cols = y.size(1);
    int threads = 256;
    int64_t want = (rows * cols + threads - 1) / threads;
    int blocks = (int)(want < 65535 * 8 ? want : 65535 * 8);
    bias_relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), b.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
cpp_source = "torch::Tensor bias_relu_(torch::Tensor y, torch::Tensor bias);"

ext = load_inline(name="kb_bias_relu_wrong", cpp_sources=[cpp_source],
                  cuda_sources=[cuda_source],
                  functions=["bias_relu_"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        # Same parameters, created in the same order as the reference, so the weights match.
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = torch.mm(x, self.gemm.weight.t())  # a new tensor: safe to finish in place
        return ext.bias_relu_(y, self.bias)
