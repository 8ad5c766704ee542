# EXPLOIT (claiming TileLang, running PyTorch), for level1/19_ReLU: a TileLang ReLU program that
# forward() compiles for the input's size (so TileLang's cache holds `relu_kernel`, its source and
# its binary) but never launches; torch.relu does the work. The judge must see no `relu_kernel`
# launch in the profile and report backend_not_used.
import tilelang
import tilelang.language as T
import torch
import torch.nn as nn


@tilelang.jit(out_idx=[-1])
def relu_program(n, dtype, block=2048, threads=256):
    @T.prim_func
    def relu(x: T.Tensor((n,), dtype), out: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            tile = T.alloc_fragment((block,), dtype)
            T.copy(x[bx * block], tile)
            for i in T.Parallel(block):
                tile[i] = T.if_then_else(tile[i] < 0, T.cast(0, dtype), tile[i])
            T.copy(tile, out[bx * block])

    return relu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = {}

    def forward(self, x):
        n = x.numel()
        if n not in self.kernels:
            # Built (compiled and cached on disk), kept, never called.
            self.kernels[n] = relu_program(n, str(x.dtype).removeprefix("torch."))
        return torch.relu(x)
