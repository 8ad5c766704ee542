import json
import os
import sys

import torch
import torch.nn as nn

RECORD_PATH = "__RECORD_PATH__"


class ModelNew(nn.Module):
    """Correct, and writes down which process runs it."""

    def __init__(self):
        super().__init__()
        with open("/proc/self/cmdline") as cmdline_file:
            cmdline = cmdline_file.read().replace("\0", " ")
        with open(RECORD_PATH, "a") as record:
            record.write(
                json.dumps(
                    {
                        "pid": os.getpid(),
                        "django_loaded": "django" in sys.modules,
                        "env_has_database": any(
                            "DATABASE" in k or "SQLITE" in k for k in os.environ
                        ),
                        "cmdline": cmdline,
                    }
                )
                + "\n"
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
