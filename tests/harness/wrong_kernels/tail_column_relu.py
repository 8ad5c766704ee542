"""A ReLU over column blocks whose bound is one short: the last column is never written (the
issue-64 kernel, once told "Maybe a precision issue ... fp16 inputs")."""

import torch
import torch.nn as nn

BLOCK = 128


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        cols = x.shape[1] - 1  # the bug: one short
        for start in range(0, cols, BLOCK):
            stop = min(start + BLOCK, cols)
            out[:, start:stop] = x[:, start:stop].clamp_min(0)
        return out


def get_inputs():
    return [torch.randn(64, 512)]


def get_init_inputs():
    return []
