import ctypes

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Reads address 0 on its first call: the process dies with SIGSEGV."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctypes.string_at(0)
        return x
