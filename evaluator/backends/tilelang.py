"""TileLang kernels (@T.prim_func programs, usually built by a @tilelang.jit function): tiles,
buffers and loops in Python, which TileLang lowers through TVM to CUDA C++ and compiles on the
GPU host (its nvcc, or NVRTC).

Naming: TileLang's SplitHostDevice pass names the device kernel of a program after its global
symbol, which is the Python function's name, plus `_kernel` (a second kernel of the same program
gets `_1`, ...): `@T.prim_func def copy` runs as `copy_kernel`. TileLang keeps what it built
(the CUDA source, the library) in TILELANG_CACHE_DIR, set to the slot's `tilelang` folder, where
the judge looks for that name.

A program's shapes are compile-time constants here (one compile per shape and dtype, then
cached): the starter pins its block and thread counts and autotunes nothing.
"""

from evaluator.backends import Backend

STARTER = """\
import torch
import tilelang
import tilelang.language as T


# One program per (size, dtype), compiled on its first call and then cached; the block and thread
# counts are pinned here (TileLang's autotuner would take minutes of the time limit).
@tilelang.jit(out_idx=[-1])
def pass_through_program(n, dtype, block=1024, threads=256):
    @T.prim_func
    def pass_through_kernel(x: T.Tensor((n,), dtype), out: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:  # the grid: a block per tile
            for i in T.Parallel(block):
                if bx * block + i < n:  # the tail: the last tile may reach past the end
                    out[bx * block + i] = x[bx * block + i]  # your computation, per element

    return pass_through_kernel


def pass_through(x: torch.Tensor) -> torch.Tensor:
    flat = x.contiguous().view(-1)  # one dimension, so that one program fits every shape
    if flat.numel() == 0:
        return torch.empty_like(x)
    kernel = pass_through_program(flat.numel(), str(flat.dtype).removeprefix("torch."))
    return kernel(flat).view(x.shape)  # out_idx=[-1]: the kernel allocates and returns `out`
"""

BACKEND = Backend(
    name="tilelang",
    label="TileLang",
    summary="custom TileLang kernels (@T.prim_func programs with T.Kernel grids, built by "
            "@tilelang.jit), with pinned block and thread counts so that no autotuning runs",
    devices=("gpu",),
    packages=("torch", "tilelang"),
    # A TileLang program (`T.prim_func`, T being tilelang.language) and the jit that builds one.
    decorators=("tilelang.jit", "tilelang.jit.jit", "tilelang.language.prim_func",
                "tilelang.language.eager.prim_func",
                "tilelang.language.eager.builder.prim_func"),
    own_kernels=("tilelang",),
    evidence="cache",
    kernel_suffix="_kernel",
    kernel_mangled=True,  # `_1`, `_2` for a program's further kernels
    cache_env={"TILELANG_CACHE_DIR": "tilelang"},
    starter_kernel=STARTER,
)
