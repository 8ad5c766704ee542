"""Process helpers shared by the sandbox (runner side) and the judge: resource limits and log
capture. No torch import."""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from evaluator.errors import TRUNCATION_MARKER, clean_text


def total_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (which may hold spaces and ")"): the
    state letter first, then the parent pid...; None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def resolve_limits(limits: dict[str, Any], on_gpu: bool) -> dict[str, int | None]:
    """Turn the job's limits into rlimit values (None = leave as is)."""
    as_mb = limits.get("address_space_mb")
    if as_mb == "auto":
        # CUDA maps huge virtual ranges (unified addressing); RLIMIT_AS breaks it.
        total = total_memory_bytes()
        as_bytes = None if on_gpu or not total else total * 3 // 4
    elif as_mb is None or on_gpu:
        as_bytes = None
    else:
        as_bytes = int(as_mb) * 1024 * 1024
    return {
        "RLIMIT_AS": as_bytes,
        "RLIMIT_NOFILE": limits.get("open_files"),
        "RLIMIT_NPROC": limits.get("processes"),
        "RLIMIT_FSIZE": resolve_file_size_bytes(limits),
        "RLIMIT_CORE": None if limits.get("core_dumps", False) else 0,
        # The kernel's out-of-memory killer takes the candidate's processes first (1000: the
        # most), never the judge, the runner or another user's process.
        OOM_SCORE_ADJ: limits.get("oom_score_adj", 1000),
    }


OOM_SCORE_ADJ = "oom_score_adj"  # not an rlimit: /proc/self/oom_score_adj, applied the same way


def resolve_file_size_bytes(limits: dict[str, Any]) -> int | None:
    """RLIMIT_FSIZE: the largest file the candidate's processes may write, the build's objects
    and the channel's memfd (the worker's outputs travel there on the CPU) included. "auto": a
    quarter of the host's memory, at least 2 GiB and at most 16 GiB: past the largest object a
    CUDA build writes (tens of MB) and the outputs of the problems we serve."""
    value = limits.get("file_size_mb")
    if value is None:
        return None
    if value == "auto":
        total = total_memory_bytes()
        return min(max(total // 4, 2 << 30), 16 << 30) if total else 2 << 30
    return int(value) * 1024 * 1024


def resolve_memory_bytes(limits: dict[str, Any]) -> int | None:
    """The memory of all of an evaluation's sandboxed processes together (its cgroup's
    memory.max, tmpfs and memfd pages counted): "auto" is three quarters of the host's."""
    value = limits.get("memory_mb")
    if value is None:
        return None
    if value == "auto":
        total = total_memory_bytes()
        return total * 3 // 4 if total else None
    return int(value) * 1024 * 1024


def apply_limits(rlimits: dict[str, int | None]) -> dict[str, int]:
    """Set these limits on the calling process (soft and hard, lowering only), and return what
    was applied. Each process applies its own at start, before it runs anything untrusted: no
    preexec_fn, which is unsafe when the parent has threads (the runner may)."""
    applied: dict[str, int] = {}
    for name, value in rlimits.items():
        if value is None:
            continue
        if name == OOM_SCORE_ADJ:
            try:  # raising it needs no privilege; lowering it back does
                Path("/proc/self/oom_score_adj").write_text(str(int(value)))
                applied[name] = int(value)
            except (OSError, ValueError):
                pass
            continue
        if name == "RLIMIT_FSIZE":
            # A write past the limit fails with EFBIG ("File too large", which the compiler or
            # the kernel's traceback then shows) instead of killing the process with SIGXFSZ;
            # programs it starts (the compilers) inherit the ignored signal.
            with contextlib.suppress(OSError, ValueError):
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        res = getattr(resource, name)
        try:
            _, hard = resource.getrlimit(res)
            new = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(res, (new, new))
            applied[name] = new
        except (ValueError, OSError):
            pass  # an unprivileged host may refuse; run with what it allows
    return applied


class LogCapture:
    """Drain a pipe in a thread, keeping the first and last `limit // 2` bytes (a candidate
    printing gigabytes costs it time, not the judge memory)."""

    def __init__(self, stream: IO[bytes], limit: int):
        self.stream = stream
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = self.stream.read1(65536)  # type: ignore[attr-defined]
            except (OSError, ValueError):
                break
            if not chunk:
                break
            room = self.half - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            self.tail += chunk
            excess = len(self.tail) - self.half
            if excess > 0:
                del self.tail[:excess]  # cheap: bytearray deletes from the front in place
                self.dropped += excess

    def text(self, wait: float = 2.0) -> str:
        self.thread.join(timeout=wait)
        out = bytes(self.head).decode(errors="replace")
        if self.dropped:
            out += TRUNCATION_MARKER.format(n=self.dropped)
        out += bytes(self.tail).decode(errors="replace")
        return clean_text(out)


_PR_SET_PDEATHSIG = 1


def _resolve_prctl() -> Any:
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]
    return prctl


# Resolved once, here, so that the preexec function below only calls it: between fork and exec
# a child of a threaded parent must not load libraries or take locks another thread may hold.
_prctl = _resolve_prctl()


def die_with_parent_preexec() -> Callable[[], None] | None:
    """A preexec_fn that makes the child die (SIGKILL) when the thread that started it dies.

    The sandbox's judge is started this way, so a runner worker killed with SIGKILL takes its
    evaluation down with it instead of leaving an orphan tree on the GPU (`unshare
    --kill-child` covers unshare's own death only). The parent's pid is checked after the call:
    if the parent already died between fork and prctl, the child exits at once.
    """
    if _prctl is None:
        return None
    parent = os.getpid()
    prctl = _prctl

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def parent_death_signal_available() -> bool:
    return _prctl is not None


def oom_kill_count() -> int | None:
    """How many processes the kernel's out-of-memory killer has killed: host-wide (/proc/vmstat)
    plus this process's memory cgroup (v2 memory.events, v1 memory.oom_control), whichever
    can be read. Compared
    before and after an evaluation to tell an OOM kill from another SIGKILL."""
    total: int | None = None
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                total = int(line.split()[1])
                break
    except (OSError, ValueError):
        pass
    try:
        cgroups = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        cgroups = []
    for line in cgroups:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2
            candidate = Path("/sys/fs/cgroup") / path.lstrip("/") / "memory.events"
        elif "memory" in controllers.split(","):  # cgroup v1
            candidate = Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "memory.oom_control"
        else:
            continue
        try:
            for entry in candidate.read_text().splitlines():
                if entry.startswith("oom_kill "):
                    total = (total or 0) + int(entry.split()[1])
        except (OSError, ValueError):
            continue
    return total


def _task_ids(pid: int) -> list[str]:
    """The process's threads (tasks) as /proc names them; none once it is gone."""
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def process_tree(root_pid: int) -> list[int]:
    """The pids below `root_pid` (the sandbox's processes, as the host numbers them)."""
    seen: list[int] = []
    todo = [root_pid]
    while todo and len(seen) < 256:
        pid = todo.pop()
        for tid in _task_ids(pid):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    children = [int(p) for p in f.read().split()]
            except (OSError, ValueError):
                continue
            for child in children:
                if child not in seen:
                    seen.append(child)
                    todo.append(child)
    return seen


def kill_tagged(token: str, *, uid: int | None = None) -> int:
    """Kill every process whose environment carries this evaluation's token, or that runs as
    the evaluation's own candidate uid; returns how many were found alive.

    The backstop after the process group: a process that left it (setsid; the worker's sandbox
    is a session of its own) still carries the environment it inherited and its uid.
    """
    needle = f"KB_EVAL_TOKEN={token}".encode()
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            ours = False
            if uid is not None:
                with open(f"/proc/{entry}/status", "rb") as f:
                    for line in f:
                        if line.startswith(b"State:") and line.split()[1] in (b"Z", b"X"):
                            break  # dead already, waiting to be reaped
                        if line.startswith(b"Uid:"):
                            ours = int(line.split()[1]) == uid
                            break
            if not ours:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    ours = needle in f.read().split(b"\0")
            if ours:
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
        except (OSError, ValueError):
            continue
    return killed
