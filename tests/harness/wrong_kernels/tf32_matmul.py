"""A matmul on TF32 tensor cores: its operands rounded to 10 mantissa bits (round to nearest
even), the products accumulated in fp32; what Triton's tl.dot does by default. Not a bug in its
indices: the only one of these kernels whose error is a precision issue."""

import torch
import torch.nn as nn


def tf32(t):
    bits = t.contiguous().view(torch.int32)
    bits = bits + (0x0FFF + ((bits >> 13) & 1))
    return (bits & -0x2000).view(torch.float32)


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


class ModelNew(nn.Module):
    def forward(self, a, b):
        return tf32(a) @ tf32(b)


def get_inputs():
    return [torch.randn(64, 512), torch.randn(512, 64)]


def get_init_inputs():
    return []
