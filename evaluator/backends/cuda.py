"""CUDA C++ through torch.utils.cpp_extension.load_inline, on an NVIDIA GPU."""

from evaluator.backends import Backend

STARTER = '''\
import torch
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

template <typename scalar_t>
__global__ void pass_through_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out,
                                    int64_t n) {{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
        out[i] = x[i];  // your computation, one element per thread
    }}
}}

torch::Tensor pass_through(torch::Tensor x) {{
    TORCH_CHECK(x.is_cuda(), "pass_through takes a CUDA tensor");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    int64_t n = input.numel();
    if (n == 0) return out;
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    auto stream = c10::cuda::getCurrentCUDAStream();  // the stream the judge times
    AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, input.scalar_type(),
                               "pass_through", [&] {{
        pass_through_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
            input.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n);
    }});
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}}
"""

extension = load_inline(
    name="{name}",
    cpp_sources="torch::Tensor pass_through(torch::Tensor x);",
    cuda_sources=CUDA_SOURCE,
    functions=["pass_through"],
    verbose=False,
)
pass_through = extension.pass_through
'''

BACKEND = Backend(
    name="cuda",
    label="CUDA",
    summary="custom CUDA kernels, compiled inline with torch.utils.cpp_extension.load_inline",
    devices=("gpu",),
    packages=("torch",),
    builds_extension=True,
    # Device kernels (__global__) and the extension's exported functions.
    own_kernels=("cuda", "load_inline_functions"),
    evidence="extension",
    starter_kernel=STARTER,
)
