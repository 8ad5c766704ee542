"""A matmul that stores C[i, j] at (j, i): its output is the product transposed."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


class ModelNew(nn.Module):
    def forward(self, a, b):
        return (b.T @ a.T).contiguous()  # the bug: C transposed


def get_inputs():
    return [torch.randn(48, 64), torch.randn(64, 48)]


def get_init_inputs():
    return []
