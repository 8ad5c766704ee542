"""C++ on the CPU through torch.utils.cpp_extension.load_inline."""

from evaluator.backends import Backend

STARTER = '''\
import torch
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor pass_through(torch::Tensor x) {{
    TORCH_CHECK(x.device().is_cpu(), "pass_through takes a CPU tensor");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const int64_t n = input.numel();
    AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, input.scalar_type(),
                               "pass_through", [&] {{
        const scalar_t* in = input.data_ptr<scalar_t>();
        scalar_t* o = out.data_ptr<scalar_t>();
        for (int64_t i = 0; i < n; ++i) {{
            o[i] = in[i];  // your computation, element by element
        }}
    }});
    return out;
}}
"""

extension = load_inline(
    name="{name}",
    cpp_sources=CPP_SOURCE,
    functions=["pass_through"],
    extra_cflags=["-O3"],
    verbose=False,
)
pass_through = extension.pass_through
'''

BACKEND = Backend(
    name="cpp",
    label="C++",
    summary="custom C++ code, compiled inline with torch.utils.cpp_extension.load_inline",
    devices=("cpu",),  # a GPU runner's compiled language is CUDA
    packages=("torch",),
    builds_extension=True,
    own_kernels=("cuda", "load_inline_functions"),
    evidence="extension",
    starter_kernel=STARTER,
)
