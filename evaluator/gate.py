"""One device shared by several evaluations, held alone while one of them is timed.

A GPU serving one evaluation at a time is idle most of it: starting processes, compiling,
loading, the correctness trials and the profiled call leave it waiting on the host. A runner
may therefore run several evaluations per device (`RUNNER_EVALUATIONS_PER_GPU`). What must not
change is the timing: while one evaluation is timed, no other evaluation's work runs on its
device.

The judges (trusted, ours) drive every step of their evaluation, so they take turns through two
file locks in the device's gate folder, which the runner names in the job (`gate_dir`):

- `shared()` around each untimed step that uses the device (a correctness trial, or all of them
  with the profiling worker's calls beside them until it has replied; the reference on its
  inputs; the transfer of the timing sets; a profiled call made after the timing): any number
  at once;
- `exclusive()` around the timed calls, candidate and reference: it waits until the steps in
  progress have ended (each ends with the device synchronised) and lets none start meanwhile.

Readers pass a turnstile that a waiting writer holds, so a steady stream of short untimed steps
cannot keep a timing waiting for ever (flock alone favours none). A step is short (one call and
its check); a step that hangs holds the others' timing back until its own evaluation's time
limit ends it, and then its locks go with its process.

The candidates' own processes take no turns: a kernel's thread or child can keep the device
busy while another evaluation is timed. So each judge names its candidate processes in the
gate's folder (`candidates()`): the evaluation's cgroup where the runner made one, and the roots
of its sandboxes with the pid namespace they are numbered in. `exclusive()` stands every other
evaluation's candidate processes still for the length of the window and lets them go on after:
through the cgroup v2 freezer where there is a cgroup, else by SIGSTOP and SIGCONT to the whole
tree under each root where the two judges number processes alike (a judge in a pid namespace
of its own sees no other evaluation's processes: those it cannot stop are counted, not
stopped). A judge also lets its own go on at each of its steps, so none stays stopped if the
judge that stopped them died. What each window froze is recorded (`frozen`).

`admitted()` keeps the device's memory from being over-committed: an evaluation waits to start
until the memory it is expected to need (runner side: from the problem's validated peak) fits
beside what the evaluations already admitted expect.

No torch, no Django: the runner and the judge both import it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

TURNSTILE = "turnstile.lock"
CANDIDATES = "candidates"  # one file per judge: the pids of its sandboxes' roots
GATE = "gate.lock"
LEDGER = "memory.json"
LEDGER_LOCK = "memory.lock"
RESERVED = "reserved"  # the end of a reservation's key in the ledger (an `alone` or late waiter)
_RANK_CLASS = 10**20  # a reservation's rank: its class times this, plus when it was made (ns)


class DeviceGate:
    """The gate of one device; a no-op without a folder (the device is not shared)."""

    def __init__(self, folder: str | os.PathLike | None,
                 sync: Callable[[], None] | None = None, deadline: float | None = None):
        self.folder = Path(folder) if folder else None
        self.sync = sync  # waits for this process's device work: a step ends with it
        # time.monotonic() past which waiting for the gate raises TimeoutError: a holder that
        # never lets go (a stopped or hung process) ends this evaluation at its own limit.
        self.deadline = deadline
        self._turnstile = self._gate = -1
        self.waited_s = 0.0  # time spent waiting for the device alone (phase "gate_wait")
        self.exclusive_held = False
        self.own_roots: list[int] = []
        self.own_cgroup: str | None = None
        self._own_name = f"{os.getpid()}.{os.urandom(4).hex()}"  # its file in CANDIDATES
        self.frozen: list[dict] = []  # per exclusive window: the other processes stopped
        if self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._turnstile = os.open(self.folder / TURNSTILE, os.O_RDWR | os.O_CREAT, 0o600)
            self._gate = os.open(self.folder / GATE, os.O_RDWR | os.O_CREAT, 0o600)

    @property
    def active(self) -> bool:
        return self.folder is not None

    def _lock(self, fd: int, how: int) -> None:
        if self.deadline is None:
            fcntl.flock(fd, how)
            return
        while True:
            try:
                fcntl.flock(fd, how | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= self.deadline:
                    raise TimeoutError("the device's gate was not free in time") from None
                time.sleep(0.002)

    def candidates(self, roots: list[int], cgroup: str | None = None) -> None:
        """Name this evaluation's candidate processes (the roots of its sandboxes, and its
        cgroup), so that another evaluation's timing stands them still."""
        self.own_roots = [int(p) for p in roots]
        self.own_cgroup = cgroup
        if self.folder is None:
            return
        folder = self.folder / CANDIDATES
        folder.mkdir(exist_ok=True)
        tmp = folder / f".{self._own_name}"
        tmp.write_text(json.dumps({"roots": self.own_roots, "cgroup": cgroup,
                                   "pid_ns": _pid_namespace()}))
        os.replace(tmp, folder / self._own_name)

    def _others(self) -> tuple[list[int], list[str], int]:
        """The other evaluations' candidate processes on this device: pids to stop (whole
        trees), cgroups to freeze, and how many evaluations could be reached by neither."""
        from evaluator.process import process_tree

        folder = self.folder / CANDIDATES if self.folder is not None else None
        pids: list[int] = []
        groups: list[str] = []
        unreachable = 0
        try:
            names = os.listdir(folder) if folder is not None else []
        except OSError:
            return pids, groups, unreachable
        ours = _pid_namespace()
        for name in names:
            judge = name.split(".", 1)[0]
            if name == self._own_name or not judge.isdigit():
                continue
            try:
                entry = json.loads((folder / name).read_text())
            except (OSError, ValueError):
                continue
            if not isinstance(entry, dict):
                continue
            group = entry.get("cgroup")
            if isinstance(group, str) and os.path.isfile(os.path.join(group, "cgroup.freeze")):
                groups.append(group)
            elif entry.get("pid_ns") == ours and _alive(int(judge)):
                for root in entry.get("roots") or []:
                    if isinstance(root, int) and root > 1 and _alive(root):
                        pids += [root, *process_tree(root)]
            else:
                unreachable += 1
        return pids, groups, unreachable

    def _resume_own(self) -> None:
        """Let this evaluation's candidate processes go on (a judge that stopped them for its
        window and died would leave them stopped)."""
        from evaluator.process import process_tree

        if self.own_cgroup:
            _freeze(self.own_cgroup, False)
        for root in self.own_roots:
            for pid in [root, *process_tree(root)]:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGCONT)

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        if not self.active or self.exclusive_held:
            yield
            return
        self._lock(self._turnstile, fcntl.LOCK_EX)
        try:
            self._lock(self._gate, fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        self._resume_own()  # inside the gate: no other evaluation is timed now
        try:
            yield
        finally:
            try:
                if self.sync is not None:
                    self.sync()
            finally:
                fcntl.flock(self._gate, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        if not self.active:
            yield
            return
        t0 = time.perf_counter()
        self._lock(self._turnstile, fcntl.LOCK_EX)
        try:
            self._lock(self._gate, fcntl.LOCK_EX)
            self.waited_s += time.perf_counter() - t0
            self.exclusive_held = True
            stopped: list[int] = []
            frozen: list[str] = []
            try:
                # The other evaluations' candidate processes stand still for the window (their
                # judges are outside it: they wait at the gate).
                pids, groups, unreachable = self._others()
                frozen = [g for g in groups if _freeze(g, True)]
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGSTOP)
                        stopped.append(pid)
                self.frozen.append({"processes": len(stopped), "cgroups": len(frozen),
                                    "unreachable": unreachable, "at": time.time()})
                yield
            finally:
                for group in frozen:
                    _freeze(group, False)
                for pid in stopped:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGCONT)
                self.exclusive_held = False
                try:
                    if self.sync is not None:
                        self.sync()
                finally:
                    fcntl.flock(self._gate, fcntl.LOCK_UN)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)

    def close(self) -> None:
        if self.folder is not None:
            with contextlib.suppress(OSError):
                (self.folder / CANDIDATES / self._own_name).unlink()
        for fd in (self._turnstile, self._gate):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._turnstile = self._gate = -1


def _pid_namespace() -> str:
    """This process's pid namespace (pids mean the same only within one)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _freeze(cgroup: str, on: bool) -> bool:
    """The cgroup v2 freezer: every process of the cgroup stopped (on) or let go (off)."""
    try:
        with open(os.path.join(cgroup, "cgroup.freeze"), "w") as f:
            f.write("1" if on else "0")
        return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def admitted(folder: str | os.PathLike | None, need_bytes: int, capacity_bytes: int, *,
             on_wait: Callable[[float], None] | None = None, poll_s: float = 0.2,
             max_wait_s: float = 3600.0, alone: bool = False,
             give_up: bool = False) -> Iterator[float]:
    """Wait until `need_bytes` fit beside the memory the evaluations admitted on this device
    expect (their processes still alive), then count it as taken until the block ends. Yields
    the seconds waited. One evaluation alone is always admitted (it may still run out of memory,
    which its verdict says). `on_wait(waited_s)` is called while waiting (the runner renews its
    lease there).

    `alone`: admitted only once no other evaluation is; its wait is a reservation that keeps
    new ones from being admitted meanwhile, so a steady stream of small evaluations cannot keep
    it waiting. Past `max_wait_s` an evaluation still waiting for room takes a reservation too,
    so that newcomers no longer pass it, and still starts only where it fits (beside memory it
    does not fit, a neighbour's memory would decide its verdict); with `give_up`, TimeoutError
    is raised instead. One whose need is all of `capacity_bytes` takes its reservation at once.
    Reservations are served one at a time, `alone` ones (runs again after running out of
    memory) before late ones, each kind in the order they were made."""
    if not folder or need_bytes <= 0 or capacity_bytes <= 0:
        yield 0.0
        return
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    key = f"{os.getpid()}:{os.urandom(6).hex()}"
    reservation = f"{key}:{RESERVED}"
    start = time.monotonic()
    last_call = start
    lock_fd = os.open(root / LEDGER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            try:
                ledger = _read_ledger(root)
                running = {k: n for k, n in ledger.items() if not k.endswith(RESERVED)}
                waited_out = time.monotonic() - start > max_wait_s
                # One that needs all the device admits starts only with nothing else running,
                # which a stream of smaller ones would not leave it before its wait is out: it
                # takes its place in the queue as it comes.
                late = waited_out or need_bytes >= capacity_bytes
                if (alone or late) and reservation not in ledger:
                    # Its place in the queue of reservations: runs alone (an evaluation that
                    # has already run once) first, then the late ones, each in arrival order.
                    ledger[reservation] = (0 if alone else 1) * _RANK_CLASS + time.time_ns()
                    _write_ledger(root, ledger)
                queue = sorted((n, k) for k, n in ledger.items() if k.endswith(RESERVED))
                first = queue[0][1] if queue else None
                room = not running or sum(running.values()) + need_bytes <= capacity_bytes
                if alone:
                    fits = first == reservation and not running
                elif late:  # its reservation holds newcomers back until there is room
                    fits = first == reservation and room
                else:
                    fits = first is None and room
                if fits:
                    ledger.pop(reservation, None)
                    ledger[key] = int(need_bytes)
                    _write_ledger(root, ledger)
                    break
                if waited_out and give_up:
                    raise TimeoutError("the device's memory was not free in time")
            finally:
                fcntl.flock(lock_fd, fcntl.LOCK_UN)
            time.sleep(poll_s)
            if on_wait is not None and time.monotonic() - last_call >= 2.0:
                last_call = time.monotonic()
                on_wait(last_call - start)
        yield time.monotonic() - start
    finally:
        # Whatever ended it (the block, a wait given up or interrupted): its entries go.
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        try:
            ledger = _read_ledger(root)
            if {key, reservation} & set(ledger):
                ledger.pop(key, None)
                ledger.pop(reservation, None)
                _write_ledger(root, ledger)
        finally:
            fcntl.flock(lock_fd, fcntl.LOCK_UN)
            os.close(lock_fd)


def _read_ledger(root: Path) -> dict[str, int]:
    """The ledger, without the entries of processes that died without leaving it."""
    try:
        data = json.loads((root / LEDGER).read_text() or "{}")
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, int] = {}
    for key, value in data.items():
        pid = str(key).split(":", 1)[0]
        if pid.isdigit() and _alive(int(pid)) and isinstance(value, int):
            out[str(key)] = value
    return out


def _write_ledger(root: Path, ledger: dict[str, int]) -> None:
    tmp = root / f"{LEDGER}.{os.getpid()}"
    tmp.write_text(json.dumps(ledger))
    os.replace(tmp, root / LEDGER)
