import os

import torch
import torch.nn as nn


class Model(nn.Module):
    """A forward that ends the whole process, like a reference that crashes its interpreter."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        os._exit(3)


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
