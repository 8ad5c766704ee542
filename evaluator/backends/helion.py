"""Helion kernels (@helion.kernel): PyTorch-like code over tiles, which Helion compiles to Triton
kernels on the GPU. Each kernel `name` becomes one Triton kernel `_helion_name`, compiled into
the same Triton cache as a hand-written one, so the judge checks it the same way ("triton").

Helion autotunes a kernel without a config on its first call, which takes minutes of the time
limit: the starter pins one (`config=helion.Config(...)`), and so should a submission.
"""

from evaluator.backends import Backend

STARTER = """\
import torch
import helion
import helion.language as hl


# One pinned config: Helion does not autotune a kernel that has exactly one.
@helion.kernel(config=helion.Config(block_sizes=[1024], num_warps=4))
def pass_through_kernel(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):  # the grid: one program per tile, the tail masked for you
        out[tile] = x[tile]  # your computation, a tile at a time
    return out


def pass_through(x: torch.Tensor) -> torch.Tensor:
    flat = x.contiguous().view(-1)  # one dimension, so that one block size fits every shape
    if flat.numel() == 0:
        return torch.empty_like(x)
    return pass_through_kernel(flat).view(x.shape)
"""

BACKEND = Backend(
    name="helion",
    label="Helion",
    summary="custom Helion kernels (@helion.kernel over hl.tile loops, compiled to Triton), "
            "each with a pinned helion.Config so that no autotuning runs",
    devices=("gpu",),
    packages=("torch", "triton", "helion"),
    # Its kernel decorator (`jit` is its alias).
    decorators=("helion.kernel", "helion.jit", "helion.runtime.kernel",
                "helion.runtime.kernel.kernel"),
    own_kernels=("helion",),
    evidence="triton",
    kernel_prefix="_helion_",
    starter_kernel=STARTER,
)
