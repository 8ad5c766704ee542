import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Allocates on the input's device until it runs out of memory."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hoard = []
        while True:
            hoard.append(torch.empty(1 << 30, dtype=torch.uint8, device=x.device))
