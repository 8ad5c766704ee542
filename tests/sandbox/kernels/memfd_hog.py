# ATTACK (the host's memory, past every rlimit): memory held in anonymous files is bound by no
# RLIMIT_AS (4 GiB was once held under a 1 GiB limit). Tries `memory_mb` in a memfd of its own
# (memfd_create), in the channel's memfds the judge passed in (/proc/self/fd/*: memfd:kb-*),
# and in a file of /dev/shm unlinked and kept open. The sandbox owes: memfd_create refused,
# RLIMIT_FSIZE on every file (memfds included), /dev/shm size-limited, and a cgroup that
# counts it all where the host allows one. Holds what it got `hold_s` seconds, prints it
# (KB-ATTACK line) and returns zeros.
import json
import os
import time

import torch
import torch.nn as nn

# The shared prelude: conftest.render() puts common.py's text here.
from .common import CONFIG, REPORT, Blocked, attempt

MB = 1 << 20
HELD = []


def fill(fd):
    """Write up to memory_mb into fd; raises Blocked when stopped before that."""
    chunk, total = b"m" * (16 * MB), 0
    try:
        while total < CONFIG["memory_mb"] * MB:
            total += os.pwrite(fd, chunk, total)
    except OSError as exc:
        raise Blocked(f"{total // MB} MB, then {exc.strerror}") from None
    return f"{total // MB} MB held"


def outcome(fd):
    try:
        return True, fill(fd)
    except Blocked as exc:
        return False, f"blocked at {exc}"


def own_memfd():
    fd = os.memfd_create(f"kb-attack-{CONFIG['tag']}")
    HELD.append(fd)
    return fill(fd)


def channel_memfds():
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/memfd:kb-"):
            found.append((int(fd), target))
    if not found:
        raise Blocked("no memfd of the channel found")
    results = [(target, *outcome(fd)) for fd, target in found]
    text = "; ".join(f"{target}: {what}" for target, _, what in results)
    if any(got for _, got, _ in results):
        return text
    raise Blocked(text)


def shm_unlinked():
    path = f"/dev/shm/kb-attack-{CONFIG['tag']}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.unlink(path)
    HELD.append(fd)
    return fill(fd)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        attempt("own_memfd", own_memfd)
        attempt("channel_memfds", channel_memfds)
        attempt("shm_unlinked", shm_unlinked)
        print("KB-ATTACK " + json.dumps(REPORT, sort_keys=True), flush=True)
        time.sleep(CONFIG["hold_s"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
