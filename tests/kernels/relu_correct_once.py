import os
import uuid

import torch
import torch.nn as nn

# The one place a kernel's files outlive its evaluation: its own build folder, which the runner
# keeps for the same owner and source (evaluator/runner/buildcache.py), and so hands to the
# re-verification of this very submission.
MARK_PATH = os.path.join(os.path.dirname(os.environ["TORCH_EXTENSIONS_DIR"]), "kb-mark")
# One per process that loads this file (pids repeat: each evaluation has its own pid namespace).
TOKEN = uuid.uuid4().hex


def first_process() -> bool:
    """True in the process that got here first, which leaves its token for later ones to see."""
    try:
        fd = os.open(MARK_PATH, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        with open(MARK_PATH) as mark:
            return mark.read().strip() == TOKEN
    with os.fdopen(fd, "w") as mark:
        mark.write(TOKEN)
    return True


class ModelNew(nn.Module):
    """Correct in its first evaluation only, like a kernel replaying results it stored then."""

    def __init__(self):
        super().__init__()
        self.honest = first_process()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x)
        return y if self.honest else y + 1.0
