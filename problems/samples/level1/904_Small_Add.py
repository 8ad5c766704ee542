import torch
import torch.nn as nn


class Model(nn.Module):
    """Elementwise sum of two vectors (a sample problem sized for a CPU runner)."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


size = 1 << 18


def get_inputs():
    return [torch.randn(size), torch.randn(size)]


def get_init_inputs():
    return []
