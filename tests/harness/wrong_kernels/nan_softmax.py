"""A softmax without subtracting the row's maximum: exp overflows to inf for large inputs and
inf / inf is NaN."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(x)  # the bug: exp(x - max) keeps it finite
        return e / e.sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(32, 128) * 40]


def get_init_inputs():
    return []
