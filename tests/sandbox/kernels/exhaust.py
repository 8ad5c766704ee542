# ATTACK (exhausting the host, leaving things behind): starts 200 processes that sleep (each in
# a session of its own, its environment scrubbed of the evaluation's token but tagged for the
# test, and each ending by itself after a while), writes 1 GB into its build folder, its temporary
# folder and /tmp, and allocates 4 GB of memory. The sizes come from the test. What the sandbox
# owes here is not a refusal (these fit in its limits) but that nothing of it outlives the
# evaluation and the runner goes on: the test checks that. Prints what it got (KB-ATTACK
# line) and returns zeros.
import json
import os
import subprocess
import tempfile

import torch
import torch.nn as nn

# The shared prelude: conftest.render() puts common.py's text here.
from .common import CONFIG, REPORT, attempt

MB = 1 << 20


def fork_many():
    tag, started, errors = CONFIG["tag"], [], set()
    env = {"PATH": "/usr/bin:/bin", "KB_ATTACK_TAG": tag}
    for _ in range(CONFIG["processes"]):
        try:
            started.append(subprocess.Popen(
                ["/bin/sh", "-c", f"sleep {CONFIG['sleep_s']}", f"kb-attack-{tag}"], env=env,
                start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
        except OSError as exc:
            errors.add(f"{type(exc).__name__}: {exc.strerror}")
    return f"{len(started)} of {CONFIG['processes']} started {sorted(errors)}"


def fill(folder):
    path = os.path.join(folder, f"kb-attack-{CONFIG['tag']}.bin")
    chunk, written = b"k" * (16 * MB), 0
    try:
        with open(path, "wb") as f:
            while written < CONFIG["write_mb"] * MB:
                f.write(chunk)
                written += len(chunk)
    except OSError as exc:
        return f"{written // MB} MB into {path}, then {type(exc).__name__}: {exc.strerror}"
    return f"{written // MB} MB into {path}"


def allocate():
    blocks = []
    try:
        for _ in range(CONFIG["memory_mb"] // 256):
            blocks.append(torch.ones(64 * MB, dtype=torch.float32))  # 256 MB, touched
    except (RuntimeError, MemoryError) as exc:
        return f"{len(blocks) * 256} MB, then {type(exc).__name__}"
    finally:
        del blocks
    return f"{CONFIG['memory_mb']} MB allocated and touched"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        attempt("info_fork", fork_many)
        folders = [os.environ.get("TORCH_EXTENSIONS_DIR", ""), tempfile.gettempdir(), "/tmp"]
        for name, folder in zip(("build", "tmpdir", "slash_tmp"), folders, strict=True):
            if folder and os.path.realpath(folder) not in [
                    os.path.realpath(f) for f in folders[:folders.index(folder)]]:
                attempt(f"info_write_{name}", lambda folder=folder: fill(folder))
        attempt("info_memory", allocate)
        print("KB-ATTACK " + json.dumps(REPORT, sort_keys=True), flush=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
