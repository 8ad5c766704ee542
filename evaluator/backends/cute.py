"""CuTe DSL kernels (@cute.kernel, launched from a @cute.jit host function): CUTLASS's Python
DSL (package nvidia-cutlass-dsl, imported as `cutlass` and `cutlass.cute`), traced to MLIR and
compiled by its own bundled compiler on the GPU host.

Naming: the DSL names the device kernel of `@cute.kernel def copy` `kernel_cutlass_copy_` and
then a mangling of its arguments and a count (`kernel_cutlass_copy_tensorptrf32gmem..._0`).
cute.compile writes nothing to the DSL's file cache (CUTE_DSL_CACHE_DIR), so the worker also
asks it to keep the IR it traces (CUTE_DSL_KEEP=ir-debug: the module as traced, no extra pass,
caching left as it is) in CUTE_DSL_DUMP_DIR; both are the slot's `cute` folder, where the judge
looks for that name.

Calling a @cute.jit function from Python traces it again on every call: the starter compiles it
once per shape and dtype (`cute.compile`) and calls the compiled function, as a submission
should.
"""

from evaluator.backends import Backend

STARTER = """\
import torch
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

THREADS = 256  # threads per block, pinned


@cute.kernel
def pass_through_kernel(x: cute.Tensor, out: cute.Tensor, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * THREADS + tidx  # one element per thread
    if i < n:  # the tail: the last block may reach past the end
        out[i] = x[i]  # your computation


@cute.jit
def pass_through_launch(x: cute.Tensor, out: cute.Tensor, n: cutlass.Int32,
                        stream: cuda.CUstream):
    blocks = (n + THREADS - 1) // THREADS
    pass_through_kernel(x, out, n).launch(grid=[blocks, 1, 1], block=[THREADS, 1, 1],
                                          stream=stream)


_compiled = dict()  # (dtype, size) -> the compiled launcher: traced and compiled once


def pass_through(x: torch.Tensor) -> torch.Tensor:
    flat = x.contiguous().view(-1)  # one dimension, so that one kernel fits every shape
    out = torch.empty_like(flat)
    n = flat.numel()
    if n:
        src, dst = from_dlpack(flat), from_dlpack(out)
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)  # torch's stream
        key = (flat.dtype, n)
        if key not in _compiled:
            _compiled[key] = cute.compile(pass_through_launch, src, dst, n, stream)
        _compiled[key](src, dst, n, stream)
    return out.view(x.shape)
"""

BACKEND = Backend(
    name="cute",
    label="CuTe DSL",
    summary="custom CuTe DSL kernels (@cute.kernel launched from a @cute.jit function, "
            "compiled once with cute.compile; import cutlass.cute as cute)",
    devices=("gpu",),
    packages=("torch", "cutlass"),
    # Its device kernels and the host functions that launch them.
    decorators=("cutlass.cute.kernel", "cutlass.cute.jit"),
    own_kernels=("cute",),
    evidence="cache",
    kernel_prefix="kernel_cutlass_",
    kernel_suffix="_",
    kernel_mangled=True,
    cache_env={"CUTE_DSL_CACHE_DIR": "cute", "CUTE_DSL_DUMP_DIR": "cute"},
    env={"CUTE_DSL_KEEP": "ir-debug"},
    starter_kernel=STARTER,
)
