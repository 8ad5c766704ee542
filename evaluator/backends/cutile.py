"""cuTile kernels (@ct.kernel, `import cuda.tile as ct`, package cuda-tile): NVIDIA's tile
language, compiled from Python to Tile IR and by the `tileiras` compiler (CUDA Toolkit 13.1 or
later, or the package's `tileiras` extra) to a cubin, launched with ct.launch.

GPUs: tileiras 13.2 targets Ampere/Ada (8.x) and Blackwell (10.x, 11.x, 12.x), not Hopper
(9.0, an H100 or H200) yet, as the cuda-tile 1.7.0 package says; the self-test leaves cuTile out
elsewhere, saying so. It also needs an NVIDIA driver r580 or later.

Naming: cuTile mangles the kernel's signature into its symbol: `@ct.kernel def copy` runs as
`copy_K` + the calling convention's code (`t1`, `t2`) + each parameter's constraint
(`copy_Kt2_A...`). It
keeps the cubins in CUDA_TILE_CACHE_DIR (a SQLite file that names them), set to the slot's
`cutile` folder, where the judge looks for that name.
"""

from evaluator.backends import Backend

STARTER = """\
import torch
import cuda.tile as ct

TILE = 1024  # elements per block, pinned (a tile's dimensions are powers of two)


@ct.kernel
def pass_through_kernel(x, out, tile: ct.Constant[int]):
    bid = ct.bid(0)  # this block's tile
    block = ct.load(x, index=(bid,), shape=(tile,))  # the tail: loads and stores past the end
    ct.store(out, index=(bid,), tile=block)  # are bounds-checked; your computation on `block`


def pass_through(x: torch.Tensor) -> torch.Tensor:
    flat = x.contiguous().view(-1)  # one dimension, so that one kernel fits every shape
    out = torch.empty_like(flat)
    if flat.numel():
        grid = (ct.cdiv(flat.numel(), TILE), 1, 1)
        ct.launch(torch.cuda.current_stream(), grid, pass_through_kernel, (flat, out, TILE))
    return out.view(x.shape)
"""

BACKEND = Backend(
    name="cutile",
    label="cuTile",
    summary="custom cuTile kernels (@ct.kernel over tiles, import cuda.tile as ct, launched "
            "with ct.launch on torch's current stream)",
    devices=("gpu",),
    packages=("torch", "cuda.tile"),
    decorators=("cuda.tile.kernel",),
    own_kernels=("cutile",),
    evidence="cache",
    kernel_suffix="_K",
    kernel_mangled=True,
    cache_env={"CUDA_TILE_CACHE_DIR": "cutile"},
    compute_capabilities=(8, 10, 11, 12),
    starter_kernel=STARTER,
)
