import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B for small square matrices (a sample problem sized for a CPU runner)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


N = 256


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
