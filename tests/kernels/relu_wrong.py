import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Subtly wrong: a leaky slope where ReLU has none."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x > 0, x, 0.01 * x)
