import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A linear layer followed by dropout that was left active (training=True)."""

    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(self.linear(x), p=0.5, training=True)


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return [64]
