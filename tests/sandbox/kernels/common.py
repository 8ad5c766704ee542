# What every attack kernel shares. An attack is submitted as one file: conftest.render()
# puts this module's text in place of the kernel's `from .common import ...` line, with
# `$config` (string.Template) filled in, so the kernels import it only for the linter.
import json
import os

# Filled in by the test (string.Template): what an attacker knows of the open-source layout.
CONFIG = json.loads(r"""$config""")
REPORT: dict[str, str] = {}


class Blocked(Exception):
    """Nothing to attack was reachable (no target visible, nothing writable)."""


def attempt(name, action):
    try:
        REPORT[name] = "GOT " + str(action())[:300]
    except Exception as exc:
        REPORT[name] = f"blocked: {type(exc).__name__}: {exc}"[:300]


def own_pid():
    return int(os.readlink("/proc/self"))


def processes():
    """pid -> (parent pid, command line) of every process visible in /proc."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                ppid = next(int(line.split()[1]) for line in f if line.startswith("PPid:"))
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                found[int(entry)] = (ppid, f.read().replace(b"\0", b" "))
        except (OSError, StopIteration, ValueError):
            continue
    return found


def ancestors(procs, pid):
    out = []
    while pid in procs and procs[pid][0] not in (0, pid) and len(out) < 64:
        pid = procs[pid][0]
        out.append(pid)
    return out


def in_scope(procs):
    """Every visible process but this one; where the runner itself is visible (no sandbox),
    only the runner's own tree: the test must not touch the rest of the machine."""
    runner, me = CONFIG["runner_pid"], own_pid()
    tree = runner in procs and b"manage.py" in procs[runner][1]
    return [p for p in sorted(procs) if p != me
            and (not tree or p == runner or runner in ancestors(procs, p))]
