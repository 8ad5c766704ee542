"""A bias add, one program a row, whose first program skips the bias (a guard `row > 0`
meant for something else)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols))

    def forward(self, x):
        return x + self.bias


class ModelNew(Model):
    def forward(self, x):
        out = torch.empty_like(x)
        for row in range(x.shape[0]):
            out[row] = x[row] + self.bias if row > 0 else x[row]  # the bug
        return out


def get_inputs():
    return [torch.randn(32, 256)]


def get_init_inputs():
    return [256]
