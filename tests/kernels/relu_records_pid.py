import json
import os
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Correct, and says (on its standard output, which the evaluation keeps) which process
    runs it. The sandbox gives it no folder of the host's to write to."""

    def __init__(self):
        super().__init__()
        with open("/proc/self/cmdline") as cmdline_file:
            cmdline = cmdline_file.read().replace("\0", " ")
        record = {
            "pid": os.getpid(),
            "uid": os.getuid(),
            "django_loaded": "django" in sys.modules,
            "env_has_database": any("DATABASE" in k or "SQLITE" in k for k in os.environ),
            "cmdline": cmdline,
        }
        print("KB-RECORD " + json.dumps(record), flush=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
