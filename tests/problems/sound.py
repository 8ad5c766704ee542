import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer, ReLU, then scaled by a second input: every input matters."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)) * scale


batch_size = 16
in_features = 32
out_features = 24


def get_inputs():
    return [torch.randn(batch_size, in_features), torch.rand(batch_size, out_features) + 0.5]


def get_init_inputs():
    return [in_features, out_features]
