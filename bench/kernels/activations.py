"""Our own kernels for KernelBench's elementwise level-1 problems at their real sizes
(4096 x 393216 fp32: 6 GiB a tensor), in CUDA, Triton and PyTorch, right and wrong.

    from bench.kernels.activations import write_mix
    mix = write_mix(folder)  # [(problem file, kernel file, backend), ...]

Each problem gets one kernel per backend: right in two of them, wrong in the third (the wrong
one adds 0.125 to every element, which no tolerance accepts), the wrong backend turning with
the problem; and a second right Triton kernel in blocks of 1024. The sources are written from
one template per backend, so that the bench's mix covers many problems without a file each in
the repository.
"""

from __future__ import annotations

from pathlib import Path

# Problem file: (Triton expression, CUDA expression, PyTorch expression), each of `x`.
ACTIVATIONS: dict[str, tuple[str, str, str]] = {
    "level1/19_ReLU.py": ("tl.maximum(x, 0.0)", "fmaxf(x, 0.f)", "torch.clamp_min(x, 0.0)"),
    "level1/20_LeakyReLU.py": ("tl.where(x > 0, x, 0.01 * x)", "x > 0.f ? x : 0.01f * x",
                               "torch.where(x > 0, x, 0.01 * x)"),
    "level1/21_Sigmoid.py": ("1.0 / (1.0 + tl.exp(-x))", "1.f / (1.f + expf(-x))",
                             "1.0 / (1.0 + torch.exp(-x))"),
    "level1/22_Tanh.py": ("2.0 / (1.0 + tl.exp(-2.0 * x)) - 1.0", "tanhf(x)",
                          "2.0 / (1.0 + torch.exp(-2.0 * x)) - 1.0"),
    "level1/25_Swish.py": ("x / (1.0 + tl.exp(-x))", "x / (1.f + expf(-x))",
                           "x / (1.0 + torch.exp(-x))"),
    "level1/26_GELU_.py": ("0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))",
                           "0.5f * x * (1.f + erff(x * 0.70710678f))",
                           "0.5 * x * (1.0 + torch.erf(x * 0.7071067811865476))"),
    "level1/27_SELU_.py": (
        "1.0507009873554805 * tl.where(x > 0, x, 1.6732632423543772 * (tl.exp(x) - 1.0))",
        "1.0507009873554805f * (x > 0.f ? x : 1.6732632423543772f * expm1f(x))",
        "1.0507009873554805 * torch.where(x > 0, x, 1.6732632423543772 * torch.expm1(x))"),
    "level1/28_HardSigmoid.py": ("tl.minimum(tl.maximum(x / 6.0 + 0.5, 0.0), 1.0)",
                                 "fminf(fmaxf(x / 6.f + 0.5f, 0.f), 1.f)",
                                 "torch.clamp(x / 6.0 + 0.5, 0.0, 1.0)"),
    "level1/29_Softplus.py": ("tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(x)))",
                              "x > 20.f ? x : log1pf(expf(x))",
                              "torch.where(x > 20, x, torch.log1p(torch.exp(x)))"),
    "level1/30_Softsign.py": ("x / (1.0 + tl.abs(x))", "x / (1.f + fabsf(x))",
                              "x / (1.0 + torch.abs(x))"),
    "level1/31_ELU.py": ("tl.where(x > 0, x, tl.exp(x) - 1.0)", "x > 0.f ? x : expm1f(x)",
                         "torch.where(x > 0, x, torch.expm1(x))"),
    "level1/32_HardTanh.py": ("tl.minimum(tl.maximum(x, -1.0), 1.0)",
                              "fminf(fmaxf(x, -1.f), 1.f)", "torch.clamp(x, -1.0, 1.0)"),
}
BACKENDS = ("triton", "cuda", "torch")
WRONG = {"triton": " + 0.125", "cuda": " + 0.125f", "torch": " + 0.125"}

# Every template's ModelNew takes whatever the problem's Model takes (ELU's alpha is 1.0 in
# KernelBench's get_init_inputs, which these kernels assume).
_MODEL = '''

class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
{body}
'''

_TRITON = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def {name}_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, {expr}, mask=mask)
''' + _MODEL.format(body='''        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        {name}_kernel[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096)
        return y''')

_CUDA = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float act(float x) {{ return {expr}; }}

// Four floats per thread through float4 loads; the tail (size % 4) element by element.
__global__ void {name}_vec4(const float4* __restrict__ x, float4* __restrict__ y, long n4) {{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < n4; i += stride) {{
        float4 v = x[i];
        v.x = act(v.x); v.y = act(v.y); v.z = act(v.z); v.w = act(v.w);
        y[i] = v;
    }}
}}

__global__ void {name}_tail(const float* __restrict__ x, float* __restrict__ y, long start,
                            long n) {{
    long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = act(x[i]);
}}

torch::Tensor forward(torch::Tensor x) {{
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "a float32 CUDA tensor");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    long n = input.numel();
    long n4 = n / 4;
    int threads = 256;
    int blocks = (int)std::min<long>((n4 + threads - 1) / threads, 132L * 32);
    if (n4 > 0) {{
        {name}_vec4<<<blocks, threads>>>(
            reinterpret_cast<const float4*>(input.data_ptr<float>()),
            reinterpret_cast<float4*>(out.data_ptr<float>()), n4);
    }}
    if (n - n4 * 4 > 0) {{
        {name}_tail<<<1, 256>>>(input.data_ptr<float>(), out.data_ptr<float>(), n4 * 4, n);
    }}
    return out;
}}
"""

ext = load_inline(name="kb_{name}", cpp_sources="torch::Tensor forward(torch::Tensor x);",
                  cuda_sources=cuda_source, functions=["forward"], verbose=False)
''' + _MODEL.format(body="        return ext.forward(x)")

_TORCH = '''import torch
import torch.nn as nn
''' + _MODEL.format(body="        return {expr}")

_TEMPLATES = {"triton": _TRITON, "cuda": _CUDA, "torch": _TORCH}


def kernel_source(problem_file: str, backend: str, *, wrong: bool = False,
                  block: int = 4096) -> str:
    expr = ACTIVATIONS[problem_file][BACKENDS.index(backend)]
    if wrong:
        expr = f"({expr}){WRONG[backend]}"
    # An identifier (a problem's file name starts with its number): "act_tanh_right".
    op = Path(problem_file).stem.split("_", 1)[1].lower().strip("_")
    name = f"act_{op}_{'wrong' if wrong else 'right'}"
    source = _TEMPLATES[backend].format(name=name, expr=expr)
    return source.replace("4096", str(block)) if backend == "triton" else source


def references() -> dict:
    """Each problem's reference as KernelBench's Model computes it, a function of the input
    (tests/test_activation_kernels.py holds them to the problem files)."""
    import torch

    f = torch.nn.functional
    return {
        "level1/19_ReLU.py": torch.relu,
        "level1/20_LeakyReLU.py": lambda x: f.leaky_relu(x, negative_slope=0.01),
        "level1/21_Sigmoid.py": torch.sigmoid,
        "level1/22_Tanh.py": torch.tanh,
        "level1/25_Swish.py": lambda x: x * torch.sigmoid(x),
        "level1/26_GELU_.py": f.gelu,
        "level1/27_SELU_.py": torch.selu,
        "level1/28_HardSigmoid.py": f.hardsigmoid,
        "level1/29_Softplus.py": f.softplus,
        "level1/30_Softsign.py": lambda x: x / (1 + torch.abs(x)),
        "level1/31_ELU.py": lambda x: f.elu(x, alpha=1.0),
        "level1/32_HardTanh.py": lambda x: f.hardtanh(x, min_val=-1.0, max_val=1.0),
    }


def wrong_backend(index: int) -> str:
    """The backend whose kernel is wrong for the index-th problem: each in turn."""
    return BACKENDS[index % len(BACKENDS)]


def write_mix(folder: Path, problems: int | None = None, *,
              pairs: bool = False) -> list[tuple[str, str, str]]:
    """Write every problem's kernels (or the first `problems` problems') into `folder`; their
    (problem, file, backend). A wrong kernel's file name says "wrong" (what the benches expect
    of it). `pairs`: two kernels a problem, the wrong one and the right one of the next
    backend in turn (each backend still right and wrong across three problems)."""
    folder.mkdir(parents=True, exist_ok=True)
    mix = []
    for index, problem_file in enumerate(list(ACTIVATIONS)[:problems]):
        chosen = BACKENDS
        if pairs:
            chosen = (wrong_backend(index), BACKENDS[(index + 1) % len(BACKENDS)])
        for backend in chosen:
            wrong = backend == wrong_backend(index)
            kind = "wrong" if wrong else "right"
            path = folder / f"{Path(problem_file).stem}_{backend}_{kind}.py"
            path.write_text(kernel_source(problem_file, backend, wrong=wrong))
            mix.append((problem_file, str(path), backend))
        if pairs:
            continue
        # A second right Triton kernel, in smaller blocks: another build, another launch shape.
        path = folder / f"{Path(problem_file).stem}_triton1024_right.py"
        path.write_text(kernel_source(problem_file, "triton", block=1024))
        mix.append((problem_file, str(path), "triton"))
    return mix
