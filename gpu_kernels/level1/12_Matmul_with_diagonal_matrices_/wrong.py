# SUBTLY WRONG: scales by A[col] instead of A[row] (a transposed index; the shapes agree).
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void diag_scale_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ out, int64_t rows, int64_t cols) {
    int64_t col = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t row = blockIdx.y;
    if (col < cols) {
        out[row * cols + col] = a[col] * b[row * cols + col];
    }
}

torch::Tensor diag_scale(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    auto a_c = a.contiguous();
    auto b_c = b.contiguous();
    auto out = torch::empty_like(b_c);
    int64_t rows = b_c.size(0), cols = b_c.size(1);
    dim3 threads(256);
    dim3 blocks((unsigned)((cols + 255) / 256), (unsigned)rows);
    diag_scale_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        a_c.data_ptr<float>(), b_c.data_ptr<float>(),
        out.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""
cpp_source = "torch::Tensor diag_scale(torch::Tensor a, torch::Tensor b);"

ext = load_inline(name="kb_diag_scale_wrong", cpp_sources=[cpp_source],
                  cuda_sources=[cuda_source],
                  functions=["diag_scale"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return ext.diag_scale(A, B)
