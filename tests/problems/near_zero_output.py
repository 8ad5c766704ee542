import torch
import torch.nn as nn


class Model(nn.Module):
    """The mean of each row after subtracting that same mean: rounding noise around zero."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        centered = x - x.mean(dim=1, keepdim=True)
        return centered.mean(dim=1)


def get_inputs():
    return [torch.randn(64, 512)]


def get_init_inputs():
    return []
