"""Limits that bind per evaluation: the build slot on a tmpfs of its own, and a cgroup.

rlimits are per process (RLIMIT_AS) or per file (RLIMIT_FSIZE): memory held in memfds or tmpfs
pages, and files unlinked but kept open, escape them. So where the host allows it, the runner
gives each evaluation (`limit_job`) a tmpfs of its own for the build slot, whose size binds
whatever is written there, unlinked or not, and a cgroup v2 that every process of its
sandboxes joins, whose memory.max counts their memory, tmpfs and memfd pages included, and
whose pids.max counts their processes. What could not be made is named in the result's
environment ("limits") and docs/security.md says what the operator provides instead.

The runner's side (no torch); jail.py decides the sandbox, this module binds its resources.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from evaluator import launcher
from evaluator.process import stat_fields
from evaluator.runner import buildcache

CGROUP_ROOT_ENV = "KB_CGROUP_ROOT"  # a cgroup v2 folder delegated to the runner (operator)
_CONTROLLERS = ("memory", "pids")
_MS_NOSUID, _MS_NODEV = 0x2, 0x4
_MNT_DETACH = 0x2
_cgroup_parent: tuple[str | None, str] | None = None
_swept = False  # stale slots of dead runners swept (once per process)
_cgroup_lock = threading.Lock()


def _libc_call(name: str, *args: Any) -> None:
    import ctypes

    fn = getattr(ctypes.CDLL(None, use_errno=True), name)
    if fn(*args) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def mount_slot(slot: Path, size_mb: int, uid: int | None, files: int) -> str:
    """Mount a tmpfs of `size_mb` (and at most `files` inodes) on the slot; '' when done, else
    why not. A root runner can (where it holds CAP_SYS_ADMIN); another cannot, and the slot
    stays on the host's disk."""
    if os.geteuid() != 0:
        return "the runner is not root: the build slot stays on the host's disk"
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    options = f"size={int(size_mb)}m,nr_inodes={int(files)},mode=0700{owner}"
    try:
        _libc_call("mount", b"kb-slot", str(slot).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                   options.encode())
    except (OSError, AttributeError) as exc:
        return f"the build slot's tmpfs could not be mounted ({exc}): it stays on the host's disk"
    with contextlib.suppress(OSError):
        _mark_owner(slot)
    return ""


OWNER_FILE = "kb-runner"  # beside a mounted slot: the pid and start time of the runner process


def _process_start(pid: int) -> str | None:
    fields = stat_fields(pid)
    return fields[19] if fields and len(fields) > 19 else None


def _mark_owner(slot: Path) -> None:
    (slot.parent / OWNER_FILE).write_text(f"{os.getpid()} {_process_start(os.getpid())}")


def sweep_stale_slots() -> int:
    """Unmount the slot tmpfs of evaluations whose runner process is gone (killed outright, so
    that Launch.discard never ran; its judges and sandboxes died with it) and remove their
    folders. A slot without the owner file is left alone unless no process works in its
    folder (a judge's working folder) for ten minutes. Returns how many were swept."""

    swept = 0
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        fields = line.split()
        if " - " not in line or line.split(" - ", 1)[1].split()[:2] != ["tmpfs", "kb-slot"]:
            continue
        slot = Path(fields[4])
        workdir = slot.parent
        if not workdir.name.startswith("kbeval-"):
            continue
        try:
            pid, start = (workdir / OWNER_FILE).read_text().split()
            stale = _process_start(int(pid)) != start
        except (OSError, ValueError):
            try:
                old = time.time() - workdir.stat().st_mtime > 600
            except OSError:
                old = True
            stale = old and not _someone_works_in(workdir)
        if stale:
            unmount_slot(slot)
            shutil.rmtree(workdir, ignore_errors=True)
            swept += 1
    # Their cgroups: an evaluation's is named after its folder, gone now.
    parent = _cgroup_parent[0] if _cgroup_parent else None
    if parent and os.path.isdir(parent):
        for name in os.listdir(parent):
            folder = Path(tempfile.gettempdir()) / name[3:]
            if name.startswith("kb-kbeval-") and not folder.exists():
                remove_cgroup(os.path.join(parent, name), timeout=0.5)
    return swept


def _someone_works_in(folder: Path) -> bool:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry}/cwd").startswith(str(folder)):
                    return True
    return False


def unmount_slot(slot: str | Path) -> None:
    """Detach the slot's tmpfs (its pages go once nothing holds them: every process of the
    evaluation is dead by now)."""
    with contextlib.suppress(OSError, AttributeError):
        _libc_call("umount2", str(slot).encode(), _MNT_DETACH)


def _cgroup2_mount() -> str | None:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    found = []
    for line in lines:
        fields = line.split()
        if " - " in line and line.split(" - ", 1)[1].split()[0] == "cgroup2":
            found.append(fields[4])
    return ("/sys/fs/cgroup" if "/sys/fs/cgroup" in found else found[0]) if found else None


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _find_cgroup_parent() -> tuple[str | None, str]:
    """Where this runner may make its evaluations' cgroups: the operator's delegated folder
    (KB_CGROUP_ROOT), else its own cgroup when the memory controller (and pids, where there)
    can be given to its children there. (None, why not) otherwise."""
    explicit = os.environ.get(CGROUP_ROOT_ENV, "").strip()
    if explicit:
        base = explicit
    else:
        mount = _cgroup2_mount()
        if mount is None:
            return None, "no cgroup v2 file system is mounted on this host"
        own = ""
        with contextlib.suppress(OSError):
            for line in _read("/proc/self/cgroup").splitlines():
                if line.startswith("0::"):
                    own = line[3:].strip()
        base = os.path.normpath(os.path.join(mount, own.lstrip("/")))
    try:
        controllers = _read(os.path.join(base, "cgroup.controllers")).split()
    except OSError as exc:
        return None, f"the runner's cgroup {base} cannot be read: {exc.strerror}"
    if "memory" not in controllers:
        return None, ("the cgroup v2 memory controller is not available to the runner's cgroup "
                      "(on a cgroup v1 host it is not on the v2 hierarchy); set "
                      f"{CGROUP_ROOT_ENV} to a delegated cgroup v2 folder")
    wanted = [c for c in _CONTROLLERS if c in controllers]
    try:
        _enable(base, wanted)
    except OSError as exc:
        if exc.errno != errno.EBUSY or os.environ.get(TAKE_OVER_ENV) != "1":
            return None, (f"the runner may not give the memory controller to cgroups under "
                          f"{base} ({exc.strerror}: it holds processes itself); set "
                          f"{CGROUP_ROOT_ENV} to a cgroup v2 folder delegated to it, or "
                          f"{TAKE_OVER_ENV}=1 where the runner owns its cgroup (a container)")
        try:
            _take_over(base)
            _enable(base, wanted)
        except OSError as again:
            return None, f"the runner's cgroup {base} could not be taken over: {again.strerror}"
    try:
        probe = os.path.join(base, f"kb-probe-{os.getpid()}-{os.urandom(4).hex()}")
        os.mkdir(probe)
        os.rmdir(probe)
    except OSError as exc:
        return None, (f"the runner may not make cgroups under {base} ({exc.strerror}); set "
                      f"{CGROUP_ROOT_ENV} to a cgroup v2 folder delegated to it")
    return base, ""


TAKE_OVER_ENV = "KB_CGROUP_TAKE_OVER"


def _enable(base: str, controllers: list[str]) -> None:
    enabled = _read(os.path.join(base, "cgroup.subtree_control")).split()
    wanted = " ".join(f"+{c}" for c in controllers if c not in enabled)
    if wanted:
        _write(os.path.join(base, "cgroup.subtree_control"), wanted)


def _take_over(base: str) -> None:
    """A cgroup that holds processes cannot give controllers to children (cgroup v2's "no
    internal processes" rule): every process in it moves to a leaf of its own, kb-runner, and
    the evaluations' cgroups are made beside it. Only with KB_CGROUP_TAKE_OVER=1, where the
    runner owns its cgroup (a container's)."""
    leaf = os.path.join(base, "kb-runner")
    with contextlib.suppress(FileExistsError):
        os.mkdir(leaf)
    for _ in range(10):  # processes started meanwhile are moved on the next round
        pids = _read(os.path.join(base, "cgroup.procs")).split()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                _write(os.path.join(leaf, "cgroup.procs"), pid)


def cgroup_parent() -> tuple[str | None, str]:
    """_find_cgroup_parent, decided once per process."""
    global _cgroup_parent
    with _cgroup_lock:
        if _cgroup_parent is None:
            _cgroup_parent = _find_cgroup_parent()
        return _cgroup_parent


def make_cgroup(name: str, memory_bytes: int | None, pids: int | None) -> tuple[str | None, str]:
    """A cgroup for one evaluation's sandboxes, with its limits; (path, '') or (None, why)."""
    parent, reason = cgroup_parent()
    if parent is None:
        return None, reason
    path = os.path.join(parent, f"kb-{name}")
    try:
        os.mkdir(path, 0o755)
        if memory_bytes:
            _write(os.path.join(path, "memory.max"), str(int(memory_bytes)))
            # Memory over the limit is never swapped out instead, and when the limit is hit
            # the whole sandbox is killed together (the worker first, by its oom_score_adj).
            with contextlib.suppress(OSError):
                _write(os.path.join(path, "memory.swap.max"), "0")
            with contextlib.suppress(OSError):
                _write(os.path.join(path, "memory.oom.group"), "1")
        if pids and os.path.exists(os.path.join(path, "pids.max")):
            _write(os.path.join(path, "pids.max"), str(int(pids)))
    except OSError as exc:
        remove_cgroup(path)
        return None, f"the evaluation's cgroup could not be made ({exc.strerror})"
    return path, ""


def cgroup_stats(path: str | None) -> dict[str, Any]:
    """What the evaluation's cgroup saw: peak memory, out-of-memory kills, refused forks."""
    out: dict[str, Any] = {}
    if not path:
        return out
    with contextlib.suppress(OSError, ValueError):
        out["memory_peak_mb"] = round(int(_read(os.path.join(path, "memory.peak"))) / 2**20, 1)
    for name, key in (("memory.events", "oom_kill"), ("pids.events", "max")):
        with contextlib.suppress(OSError, ValueError):
            for line in _read(os.path.join(path, name)).splitlines():
                field, _, value = line.partition(" ")
                if field == key:
                    out["oom_kills" if key == "oom_kill" else "pids_refused"] = int(value)
    return out


def remove_cgroup(path: str | None, timeout: float = 5.0) -> None:
    """Kill whatever is left in the cgroup, then remove it."""
    if not path or not os.path.isdir(path):
        return
    import signal

    with contextlib.suppress(OSError):
        _write(os.path.join(path, "cgroup.kill"), "1")  # Linux 5.14+
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return  # left for the operator's cleanup; named kb-<evaluation>
        with contextlib.suppress(OSError, ValueError):
            for pid in _read(os.path.join(path, "cgroup.procs")).split():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.05)


def limit_job(decision: dict[str, Any], limits: dict[str, Any], *, name: str,
              slot_mb: int, slot_files: int) -> dict[str, Any]:
    """Bind this evaluation's resources (the runner's side, before its judge starts): the slot
    on a tmpfs of its own, the sandboxes in a cgroup of their own. Returns the decision with
    "cgroup", "slot_tmpfs" and what was set ("limits", stored in the result's environment).
    `release` undoes it once every process of the evaluation is dead."""
    if not launcher.sandboxed(decision):
        return decision
    from evaluator.process import resolve_memory_bytes

    global _swept
    if not _swept:
        _swept = True
        cgroup_parent()
        with contextlib.suppress(Exception):
            sweep_stale_slots()
    report: dict[str, Any] = {}
    memory = resolve_memory_bytes(limits)
    pids = limits.get("processes")
    reason = mount_slot(Path(decision["slot"]), slot_mb, decision.get("uid"), slot_files)
    report["build_slot"] = ({"filesystem": "tmpfs", "size_mb": slot_mb} if not reason
                            else {"filesystem": "host", "reason": reason})
    group, why = make_cgroup(name, memory, int(pids) if pids else None)
    if group:
        has_pids = os.path.exists(os.path.join(group, "pids.max"))
        report["cgroup"] = {"memory_max_mb": memory // 2**20 if memory else None,
                            "pids_max": pids if has_pids else None}
    else:
        report["cgroup"] = False
        report["reason"] = why
    return {**decision, "cgroup": group, "slot_tmpfs": not reason, "limits": report}


def release(decision: dict[str, Any]) -> None:
    """Undo limit_job: the cgroup (and anything left in it) and the slot's tmpfs."""
    remove_cgroup(decision.get("cgroup"))
    if decision.get("slot_tmpfs"):
        unmount_slot(decision["slot"])


def report(job: dict, decision: dict[str, Any], seen: dict[str, Any]) -> dict:
    """What bound this evaluation's resources (docs/security.md, "Limits"), for its result."""
    from evaluator.process import resolve_file_size_bytes

    if not launcher.sandboxed(decision):
        return {"sandbox": False}
    report = dict(decision.get("limits") or {"cgroup": False,
                                             "reason": "no limits were set for this sandbox"})
    if report.get("cgroup") and seen:
        report["cgroup"] = {**report["cgroup"], **seen}
    fsize = resolve_file_size_bytes(job["limits"])
    report["file_size_mb"] = fsize // 2**20 if fsize else None
    report["memfd_create"] = "allowed" if decision.get("allow_memfd") else "denied"
    report["oom_score_adj"] = job["limits"].get("oom_score_adj", 1000)
    return report


def slot_over(launch: Any) -> bool:
    """Whether the build slot of `launch` (a pool.Launch) has grown past its limit. Its own
    tmpfs counts everything written there, files unlinked but kept open included; on the host's
    disk the walk sees only named files, so the deleted files the sandbox's processes hold
    open on the slot's file system are added."""
    max_bytes = buildcache.SLOT_MB * buildcache.MB
    if launch.jail.get("slot_tmpfs"):
        try:
            fs = os.statvfs(launch.slot)
            if (fs.f_blocks - fs.f_bfree) * fs.f_frsize > max_bytes:
                return True
        except OSError:
            pass
    used, _, over = buildcache.usage(launch.slot, max_bytes=max_bytes,
                                     max_files=buildcache.ENTRY_FILES * 5)
    if over or launch.jail.get("slot_tmpfs") or not launcher.sandboxed(launch.jail):
        return over
    return used + _held_deleted_bytes(launch) > max_bytes


def _held_deleted_bytes(launch: Any) -> int:
    """Bytes of deleted files on the slot's file system that the evaluation's processes (its
    candidate uid's, else those carrying its token) still hold open."""
    try:
        device = os.stat(launch.slot).st_dev
    except OSError:
        return 0
    uid = launch.jail.get("uid")
    needle = f"KB_EVAL_TOKEN={launch.token}".encode()
    seen: set[int] = set()
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if uid is not None:
                if os.stat(f"/proc/{entry}").st_uid != uid:
                    continue
            else:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if needle not in f.read().split(b"\0"):
                        continue
            for fd in os.listdir(f"/proc/{entry}/fd"):
                with contextlib.suppress(OSError):
                    st = os.stat(f"/proc/{entry}/fd/{fd}")
                    if st.st_nlink == 0 and st.st_dev == device and st.st_ino not in seen:
                        seen.add(st.st_ino)
                        total += max(st.st_size, st.st_blocks * 512)
        except OSError:
            continue
    return total
