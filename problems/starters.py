"""Starter kernels: for a problem and a backend, a file that already passes the judge and that a
person (or `kb starter`) edits into a faster one. Text only: nothing here runs it.

Every starter keeps the reference's own `Model` (renamed `Reference`) so that `ModelNew`
inherits its constructor, and with it the same parameters drawn in the same order, which the
judge compares against. PyTorch's starter is the reference's ops as they are; the other backends
run the reference's ops and then pass each output tensor through an elementwise kernel of the
backend (a copy the user turns into real work), so a starter is correct and shows the structure
of a kernel in that backend from its first submission: launch, indexing, the tail, dtypes.

The backends are named as submissions name them (`Submission.Backend`), written out here because
problems sit below submissions in the layers.
"""

import re

from problems.models import Problem

BACKENDS = ("cuda", "triton", "cpp", "torch")

_MODEL_CLASS = re.compile(r"^class\s+Model\s*([(:])", re.MULTILINE)
_MODEL_SUPER = re.compile(r"\bsuper\(\s*Model\s*,")


class StarterError(ValueError):
    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _renamed(reference: str, name: str) -> str:
    body = _MODEL_CLASS.sub(rf"class {name}\1", reference)
    return _MODEL_SUPER.sub(f"super({name},", body)


def _extension_name(problem: Problem, backend: str) -> str:
    # A valid Python identifier, one per problem and backend: the build cache keys on it too.
    return re.sub(r"\W", "_", f"kb_starter_{backend}_{problem.slug}").lower()


TORCH_HEADER = """\
# A PyTorch starter for {slug}: the reference's own ops, as ModelNew. Keep the constructor's
# and forward's signatures (and the parameters the constructor makes); make forward faster.
"""

PASS_THROUGH_HEADER = """\
# A {label} starter for {slug}. ModelNew runs the reference's ops (the class Reference
# below, the problem's Model renamed) and passes each output through `pass_through`, an
# elementwise {label} kernel that copies its input. Replace that copy with the computation,
# then drop the call to the reference in forward. Keep the constructor's and forward's
# signatures: the judge builds ModelNew with the reference's init inputs and compares their
# parameters' results.
"""

CUDA_KERNEL = '''\
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

CPP_KERNEL = '''\
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

TRITON_KERNEL = """\
import torch
import triton
import triton.language as tl


@triton.jit
def pass_through_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n  # the tail: the last block may reach past the end
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x, mask=mask)  # your computation, a block at a time


def pass_through(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        BLOCK = 1024
        pass_through_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out
"""

KERNELS = {"cuda": CUDA_KERNEL, "cpp": CPP_KERNEL, "triton": TRITON_KERNEL}
LABELS = {"cuda": "CUDA", "cpp": "C++", "triton": "Triton", "torch": "PyTorch"}

MODEL_NEW = '''

def _pass_through_all(value):
    """Each tensor of the output (a tensor, or a tuple or list of them) through the kernel."""
    if isinstance(value, torch.Tensor):
        return pass_through(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_pass_through_all(v) for v in value)
    return value


class ModelNew(Reference):
    def forward(self, *args, **kwargs):
        return _pass_through_all(super().forward(*args, **kwargs))
'''


def starter_source(*, problem: Problem, backend: str) -> str:
    """A working kernel file for `problem` in `backend` (one of BACKENDS): the submit page, the
    competition entry form and the API's starter endpoint all render it here.

    StarterError when the backend is unknown or the reference has no `class Model`. Whether the
    asker may see the reference is the caller's to check (`Problem.reference_visible_to`): a
    starter contains it."""
    if backend not in BACKENDS:
        raise StarterError(
            f"Unknown backend {backend!r}: one of {', '.join(BACKENDS)}.", code="unknown_backend"
        )
    reference = problem.current_version.source if problem.current_version_id else ""
    if not _MODEL_CLASS.search(reference):
        raise StarterError(
            f"The reference of {problem.slug} defines no class Model.", code="no_model"
        )
    if backend == "torch":
        return TORCH_HEADER.format(slug=problem.slug) + _renamed(reference, "ModelNew")
    header = PASS_THROUGH_HEADER.format(label=LABELS[backend], slug=problem.slug)
    kernel = KERNELS[backend].format(name=_extension_name(problem, backend))
    return (
        header
        + "\n"
        + kernel
        + "\n\n# The reference, as the problem defines it.\n"
        + _renamed(reference, "Reference").rstrip("\n")
        + "\n"
        + MODEL_NEW
    )
