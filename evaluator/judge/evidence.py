"""Backend evidence and CPU time, read from outside the candidate's process (the judge runs this).

The profiled call says which of the candidate's own functions and kernels ran, but it is made in
the candidate's process, whose profiler, methods and replies the candidate can rewrite. What the
judge holds such a report to is what the candidate cannot rewrite from inside:

- a compiled extension (`cuda`, `cpp`): the files the worker's process has mapped (its
  /proc/PID/maps, read by the judge outside the sandbox) that are files of the evaluation's
  build slot, each vouched for by the judge itself: opened relative to the slot with no link
  followed, a regular file, and the very file of the mapping (the device and inode of the maps
  line equal the fstat of what the judge opened); and the reported functions defined in such a
  file's ELF symbol tables (.dynsym, and .symtab where the build kept one: defined FUNC
  symbols, C++ names by their identifiers), parsed here with every offset checked, never byte
  strings found anywhere in a file;
- Triton (`triton`): the reported kernels are `@triton.jit` functions of the submitted source
  (the judge's own reading of it, static_report.py), and on a GPU each has a compiled artifact
  in the slot's Triton cache;
- a language with a compiler cache of its own (`cache`: TileLang, CuTe DSL, cuTile): the same,
  with the language's kernels of the source, and on a GPU a file of its cache folder in the
  slot that holds the name its compiler gives the device kernel.

A report that names kernels none of this shows is not evidence: the claimed backend is then
taken as not used, and where the judge cannot vouch for what it would read (a link, a FIFO, a
device, a file that is not the mapped one, mappings it cannot read) the report says "backend not
confirmed" rather than accept the claim. Nothing here opens a path, follows a link or trusts a
size that the candidate chose: every file of the slot is opened by `open_in_slot`, every read
is capped. What this cannot show: that an extension which was built and loaded really ran in the
timed call (docs/security.md, "Attacks from inside the worker").
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path
from typing import Any

from evaluator.judge.elf import Budget, elf_functions, identifiers, pread
from evaluator.process import _task_ids, process_tree, stat_fields

MAX_SO_BYTES = 1 << 30  # of the extensions one evaluation maps, at most this much is read
MAX_ARTIFACTS = 20  # files of the slot the worker maps that are vouched for, at most
MAX_CACHE_FILES = 2000  # files of a compiler's cache folder read for the names, at most
MAX_CACHE_FILE_BYTES = 64 << 20  # of each, at most this much is read
MAX_WALK_DEPTH = 32  # folders of the slot deeper than this are not looked into
MAX_WALK_ENTRIES = 50_000  # entries of the slot looked at by one walk, at most
NOT_CONFIRMED = "backend not confirmed"

# A folder of the slot, a file of the slot: no link followed, no FIFO or device waited on.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def processes_left_running(root_pid: int, before: set[int]) -> list[dict[str, Any]]:
    """The living processes below `root_pid` that were not there when `before` was taken (the
    worker's tree before the kernel was loaded), each with its command line: what the kernel
    started and left running. Read from /proc by the judge, outside the sandbox; no process is
    excused by its name, which a process can rewrite (torch.compile compiles in the worker's
    own process there: sandbox.py sets TORCHINDUCTOR_COMPILE_THREADS=1)."""
    left: list[dict[str, Any]] = []
    for pid in process_tree(root_pid):
        if pid in before:
            continue
        fields = stat_fields(pid)
        if not fields or fields[0] in "ZX":  # gone, or ended and not yet reaped
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        left.append({"pid": pid, "command": command[:200]})
    return left


# --- CPU time -------------------------------------------------------------------------------
# The kernel's CPU clock of a whole process (clock_getcpuclockid's encoding of a pid): every
# thread it ever had, ended ones included, in nanoseconds. Read for any pid of the caller's
# namespace; the sandbox's processes as the host numbers them.
_CPUCLOCK_SCHED = 2
_cgroup_choice: dict[tuple[int, str], str | None] = {}


def _read_text(path: str, limit: int = 1 << 20) -> str | None:
    """A file of /proc or the cgroup file system (the kernel's, never the candidate's)."""
    try:
        with open(path, errors="replace") as f:
            return f.read(limit)
    except OSError:
        return None


def _process_clock_s(pid: int) -> float | None:
    try:
        return time.clock_gettime((~pid << 3) | _CPUCLOCK_SCHED)
    except (OSError, OverflowError, ValueError):
        return None  # gone, or ended and not yet reaped


def _process_cpu_s(pid: int, ticks: int) -> float:
    """One process: the larger of its live threads' CPU time (the scheduler's nanoseconds per
    task) and its own (the process clock, or utime + stime of /proc/PID/stat: threads that
    ended count there), plus what its reaped children used (cutime + cstime)."""
    live = 0.0
    for tid in _task_ids(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                live += int(f.read().split()[0]) / 1e9
            continue
        except (OSError, IndexError, ValueError):
            pass
        fields = stat_fields(int(tid))
        if fields and len(fields) > 12:
            live += (int(fields[11]) + int(fields[12])) / ticks
    own = _process_clock_s(pid)  # read after the tasks: never less than their sum
    fields = stat_fields(pid)
    children = 0.0
    if fields and len(fields) > 14:
        if own is None:
            own = (int(fields[11]) + int(fields[12])) / ticks
        children = (int(fields[13]) + int(fields[14])) / ticks
    return max(live, own or 0.0) + children


def _cgroup_path(pid: int | str) -> str | None:
    """The cgroup v2 path of a process, as /proc/PID/cgroup names it (the "0::" line)."""
    text = _read_text(f"/proc/{pid}/cgroup") or ""
    for line in text.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or None
    return None


def _cgroup2_mount() -> str | None:
    """Where the cgroup v2 hierarchy is mounted whole (its root at the mount point)."""
    for line in (_read_text("/proc/self/mountinfo", 1 << 22) or "").splitlines():
        fields = line.split()
        if " - " in line and line.split(" - ", 1)[1].split()[:1] == ["cgroup2"] \
                and len(fields) > 4 and fields[3] == "/":
            return fields[4]
    return None


def _evaluation_cgroup(pids: list[int]) -> str | None:
    """The cgroup folder whose cpu.stat counts exactly these processes, where the evaluation has
    one (limits.py: the runner's, every process of its sandboxes in it): not the judge's own
    cgroup or one above it, and holding these processes and no other. Decided once for each
    root process (by its pid and start time), so that a window's two readings are of one kind."""
    root = pids[0]
    fields = stat_fields(root)
    key = (root, fields[19] if fields and len(fields) > 19 else "")
    if key in _cgroup_choice:
        return _cgroup_choice[key]
    folder = None
    path, mine, mount = _cgroup_path(root), _cgroup_path("self"), _cgroup2_mount()
    if path and path != "/" and mine and mount and mine != path \
            and not mine.startswith(path.rstrip("/") + "/"):
        candidate = os.path.join(mount, path.lstrip("/"))
        procs = (_read_text(os.path.join(candidate, "cgroup.procs")) or "").split()
        if procs and {int(p) for p in procs if p.isdigit()} == set(pids) \
                and _cgroup_usage_s(candidate) is not None:
            folder = candidate
    if len(_cgroup_choice) > 256:
        _cgroup_choice.clear()
    _cgroup_choice[key] = folder
    return folder


def _cgroup_usage_s(folder: str) -> float | None:
    for line in (_read_text(os.path.join(folder, "cpu.stat")) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == "usage_usec" and value.strip().isdigit():
            return int(value) / 1e6
    return None


def cpu_seconds(pids: list[int]) -> float:
    """The CPU time these processes (a sandbox's tree, its root first) have used so far, in
    seconds, every task counted, ended ones included: read from the kernel by the judge,
    outside the sandbox, whatever started a task (threading, _thread, a C library, fork) and
    whatever code it runs. The evaluation's cgroup's cpu.stat where it has one that holds
    exactly these processes (every process that ever ran in it, reaped or not); else, per
    process, its own CPU clock (live and ended threads) or its live tasks' time, whichever is
    larger, plus its reaped children's."""
    if not pids:
        return 0.0
    folder = _evaluation_cgroup(pids)
    if folder is not None:
        usage = _cgroup_usage_s(folder)
        if usage is not None:
            return usage
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(_process_cpu_s(pid, ticks) for pid in pids)


# --- files of the slot --------------------------------------------------------------------------
def _parts(relative: str) -> list[str] | None:
    parts = [p for p in relative.split("/") if p]
    if any(p in (".", "..") or "\0" in p for p in parts):
        return None
    return parts


def _open_folder(root: Path, parts: list[str]) -> int | None:
    """The folder root/parts..., each component opened relative to the one above it with no
    link followed (`root` itself is the runner's). None where any is not a plain folder."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    for part in parts:
        try:
            below = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except OSError:
            below = -1
        os.close(fd)
        if below < 0:
            return None
        fd = below
    return fd


def open_in_slot(root: Path, relative: str) -> tuple[int, os.stat_result] | str:
    """A regular file of the slot `root`, opened by the judge: no link followed at any
    component, never waiting (a FIFO), then fstat'ed; anything but a regular file is refused.
    Returns (fd, its fstat), which the caller closes, or why not."""
    parts = _parts(relative)
    if not parts:
        return "not a path in the slot"
    folder = _open_folder(root, parts[:-1])
    if folder is None:
        return "a folder on its path is missing or a link"
    try:
        fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=folder)
    except OSError as exc:
        return ("a link" if exc.errno == errno.ELOOP else
                f"not opened ({exc.strerror})")
    finally:
        os.close(folder)
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        return "not opened"
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return "not a regular file"
    return fd, st


def slot_files(root: Path, folder: str, *, suffixes: tuple[str, ...] = (),
               limit: int = MAX_WALK_ENTRIES) -> list[str]:
    """The regular files under root/folder (paths relative to `root`), sorted, found with no
    link followed: each folder opened relative to the one above it, each entry taken for what
    it is (a link is neither a file nor a folder here). At most `limit` files, MAX_WALK_DEPTH
    folders deep and MAX_WALK_ENTRIES entries looked at."""
    parts = _parts(folder)
    top = _open_folder(root, parts or [])
    if top is None:
        return []
    found: list[str] = []
    looked = 0

    def walk(fd: int, prefix: str, depth: int) -> None:
        nonlocal looked
        entries: list[tuple[str, bool, bool]] = []
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    looked += 1
                    if looked > MAX_WALK_ENTRIES:
                        break
                    entries.append((entry.name, entry.is_dir(follow_symlinks=False),
                                    entry.is_file(follow_symlinks=False)))
        except OSError:
            return
        for name, is_dir, is_file in sorted(entries):
            if len(found) >= limit:
                return
            if is_file and (not suffixes or name.endswith(suffixes)):
                found.append(f"{prefix}{name}")
            elif is_dir and depth < MAX_WALK_DEPTH:
                try:
                    below = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue
                try:
                    walk(below, f"{prefix}{name}/", depth + 1)
                finally:
                    os.close(below)

    try:
        walk(top, "/".join(parts or []) + "/" if parts else "", 0)
    finally:
        os.close(top)
    return found


def _slot_relative(path: str, sandbox_root: str | None, host_root: Path) -> str | None:
    """A path the worker sees, relative to the build slot, if it is in the slot."""
    roots = [str(host_root)] + ([sandbox_root] if sandbox_root else [])
    for root in roots:
        root = root.rstrip("/") + "/"
        if path.startswith(root):
            return path[len(root):]
    return None


def mapped_files(pids: list[int]) -> tuple[list[tuple[str, int, int, int]], list[str]]:
    """The files the processes have mapped, from their /proc/PID/maps (the kernel's): each
    as (the path they see, the device's major and minor number, the inode); and the pids whose
    maps could not be read."""
    files: set[tuple[str, int, int, int]] = set()
    unreadable: list[str] = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps", errors="replace") as f:
                for count, line in enumerate(f):
                    if count > 200_000:
                        break
                    parts = line.split(None, 5)
                    if len(parts) < 6 or not parts[5].startswith("/"):
                        continue
                    major, _, minor = parts[3].partition(":")
                    try:
                        files.add((parts[5].rstrip("\n"), int(major, 16), int(minor, 16),
                                   int(parts[4])))
                    except ValueError:
                        continue
        except OSError as exc:
            unreadable.append(f"{pid}: {type(exc).__name__}")
    return sorted(files), unreadable


def _vouch(build_root: Path, relative: str, mappings: set[tuple[int, int, int]],
           budget: Budget) -> set[str] | str:
    """The functions of the slot's file that the worker maps at `relative`, where the judge can
    vouch that the file it opened itself is that mapping's; else why not."""
    opened = open_in_slot(build_root, relative)
    if isinstance(opened, str):
        return f"not vouched: {opened}"
    fd, st = opened
    try:
        if (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) not in mappings:
            return "not vouched: not the mapped file (another device and inode)"
        return elf_functions(fd, st.st_size, budget)
    finally:
        os.close(fd)


def extension_evidence(reported: list[str], *, worker_pid: int | None, build_root: Path,
                       sandbox_root: str | None) -> dict[str, Any]:
    """Whether an extension built in the slot is mapped in the worker and defines what the
    profiled call reported: the files of the slot its processes map, each vouched for by the
    judge (the same file, a regular one, reached with no link) and read for its ELF symbols."""
    report: dict[str, Any] = {"kind": "extension", "reported": reported[:20]}
    try:
        _extension_evidence(report, reported, worker_pid, build_root, sandbox_root)
    except Exception as exc:  # whatever the slot holds: never accepted unread
        report["missing"] = f"{NOT_CONFIRMED}: {type(exc).__name__} while reading the slot"
    report["ok"] = "missing" not in report
    return report


def _extension_evidence(report: dict[str, Any], reported: list[str], worker_pid: int | None,
                        build_root: Path, sandbox_root: str | None) -> None:
    report["built"] = slot_files(build_root, "ext", suffixes=(".so",), limit=20)
    pids = process_tree(worker_pid) if worker_pid is not None else []
    mapped, unreadable = mapped_files(pids)
    in_slot: dict[str, set[tuple[int, int, int]]] = {}
    for path, major, minor, inode in mapped:
        relative = _slot_relative(path, sandbox_root, build_root)
        if relative is not None:
            in_slot.setdefault(relative, set()).add((major, minor, inode))
    report["mapped"] = sorted(in_slot)[:20]
    report["named"] = []
    if not pids or (unreadable and not mapped):
        # Gone, or not ours to read: no mapping the judge could vouch for.
        report["maps"] = "unreadable"
        report["missing"] = (f"{NOT_CONFIRMED}: the worker's mappings could not be read "
                             f"({', '.join(unreadable[:3]) or 'no process'})")
        return
    budget = Budget(MAX_SO_BYTES)
    artifacts: dict[str, str] = {}
    defined: set[str] = set()
    for relative in sorted(in_slot)[:MAX_ARTIFACTS]:
        functions = _vouch(build_root, relative, in_slot[relative], budget)
        if isinstance(functions, str):
            artifacts[relative] = functions
            continue
        artifacts[relative] = f"ELF, {len(functions)} functions"
        defined |= identifiers(functions)
    report["artifacts"] = artifacts
    report["named"] = sorted({n for n in reported if n and n in defined})
    if not any(v.startswith("ELF") for v in artifacts.values()):
        report["missing"] = (f"{NOT_CONFIRMED}: no extension built from the source is loaded "
                             "in its process (a shared object of the slot, the very file the "
                             "worker maps)")
    elif reported and not report["named"]:
        report["missing"] = (f"{NOT_CONFIRMED}: the reported functions are defined in no "
                             "extension the worker maps from the slot (its ELF symbols)")


def triton_evidence(reported: list[str], *, source_kernels: list[str], build_root: Path,
                    on_gpu: bool, prefix: str = "") -> dict[str, Any]:
    """Whether the reported Triton kernels are the source's, compiled in the slot on a GPU.
    `prefix`: what a compiler that writes the Triton kernel puts before the source kernel's
    name (Helion compiles `@helion.kernel def f` to the Triton kernel `_helion_f`)."""
    report: dict[str, Any] = {"kind": "triton", "reported": reported[:20],
                              "source_kernels": source_kernels[:20]}
    ours = [n for n in reported if n in source_kernels]
    report["named"] = ours
    if not ours:
        report["missing"] = ("the reported kernels are not @triton.jit (or @helion.kernel) "
                             "functions of the source")
    elif on_gpu:
        compiled = {Path(p).stem for p in slot_files(build_root, "triton",
                                                     suffixes=(".cubin", ".json"))}
        report["compiled"] = sorted(n for n in ours if prefix + n in compiled)
        if not report["compiled"]:
            report["missing"] = "no compiled artifact of the reported kernels in the slot"
    report["ok"] = "missing" not in report
    return report


def _files_naming(build_root: Path, folder: str, names: dict[str, str]) -> set[str]:
    """The keys of `names` whose value some regular file under the slot's `folder` holds
    (bytes, any format: CUDA source, a library, MLIR bytecode, SQLite): each opened with
    open_in_slot, at most MAX_CACHE_FILE_BYTES of it read."""
    found: set[str] = set()
    for relative in slot_files(build_root, folder, limit=MAX_CACHE_FILES):
        if len(found) == len(names):
            break
        opened = open_in_slot(build_root, relative)
        if isinstance(opened, str):
            continue
        fd, st = opened
        try:
            data = pread(fd, 0, min(st.st_size, MAX_CACHE_FILE_BYTES))
        except OSError:
            continue
        finally:
            os.close(fd)
        found.update(k for k, v in names.items() if k not in found and v and v.encode() in data)
    return found


def cache_evidence(reported: list[str], *, source_kernels: list[str],
                   device_names: dict[str, str], build_root: Path, folder: str,
                   on_gpu: bool) -> dict[str, Any]:
    """Whether the reported kernels are the source's (this language's), and on a GPU whether
    the language's compiler cache in the slot (`folder`) names the device kernel of each:
    `device_names` maps a source kernel to the fixed part of that name (the part before the
    arguments its compiler may append)."""
    report: dict[str, Any] = {"kind": "cache", "reported": reported[:20],
                              "source_kernels": source_kernels[:20], "cache": folder}
    ours = [n for n in reported if n in source_kernels]
    report["named"] = ours
    if not ours:
        report["missing"] = "the reported kernels are not kernels of the source in its language"
    elif on_gpu:
        found = _files_naming(build_root, folder, {n: device_names.get(n, n) for n in ours})
        report["compiled"] = sorted(found)
        if not found:
            report["missing"] = (f"no compiled artifact of the reported kernels in the slot's "
                                 f"{folder} cache")
    report["ok"] = "missing" not in report
    return report
