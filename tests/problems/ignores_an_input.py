import torch
import torch.nn as nn


class Model(nn.Module):
    """Takes predictions and targets but only ever reads the predictions."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.relu(predictions) * 2.0


def get_inputs():
    return [torch.randn(16, 32), torch.randn(16, 32)]


def get_init_inputs():
    return []
