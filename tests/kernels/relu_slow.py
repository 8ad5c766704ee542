import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Correct, but slow to build: long enough for a test to kill its runner mid-evaluation."""

    def __init__(self):
        super().__init__()
        time.sleep(__SLEEP_SECONDS__)  # noqa: F821 (the test writes the number in)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
