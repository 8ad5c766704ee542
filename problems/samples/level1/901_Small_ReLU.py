import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU on a small matrix (a sample problem sized for a CPU runner)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 256
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
