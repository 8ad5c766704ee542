import torch
import torch.nn as nn


class Model(nn.Module):
    """Returns a function of its weights broadcast to the batch: the input's values never matter."""

    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.weight).expand(x.shape[0], -1) * 2.0


def get_inputs():
    return [torch.randn(16, 48)]


def get_init_inputs():
    return [48]
