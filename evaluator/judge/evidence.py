"""Backend evidence from outside the candidate's process (the judge runs this).

The profiled call says which of the candidate's own functions and kernels ran, but it is made in
the candidate's process, whose profiler, methods and replies the candidate can rewrite. What the
judge holds such a report to is what the candidate cannot rewrite from inside:

- a compiled extension (`cuda`, `cpp`): the shared objects the worker's process has mapped (read
  by the judge from /proc, outside the sandbox), under the evaluation's build slot, and the
  reported functions named in those files (their symbols and pybind11 names are strings there);
- Triton (`triton`): the reported kernels are `@triton.jit` functions of the submitted source
  (the judge's own reading of it, static_report.py), and on a GPU each has a compiled artifact
  in the slot's Triton cache;
- a language with a compiler cache of its own (`cache`: TileLang, CuTe DSL, cuTile): the same,
  with the language's kernels of the source, and on a GPU a file of its cache folder in the
  slot that holds the name its compiler gives the device kernel.

A report that names kernels none of this shows is not evidence: the claimed backend is then
taken as not used. What this cannot show: that an extension which was built and loaded really
ran in the timed call (docs/security.md, "Attacks from inside the worker").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evaluator.process import stat_fields

MAX_SO_BYTES = 1 << 30  # a candidate's extension larger than this is not read
MAX_CACHE_FILES = 2000  # files of a compiler's cache folder read for the names, at most


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


def cpu_seconds(pids: list[int]) -> float:
    """The CPU time all threads of these processes have used so far, in seconds, read from
    /proc by the judge, outside the sandbox: a thread is a task there whatever started it
    (threading, _thread, a C library) and whatever code it runs. Per task, the scheduler's
    nanoseconds (schedstat) where the kernel keeps them, else user and system ticks."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        for tid in _task_ids(pid):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0]) / 1e9
                continue
            except (OSError, IndexError, ValueError):
                pass
            fields = stat_fields(int(tid))
            if fields and len(fields) > 12:
                total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def mapped_objects(pids: list[int]) -> tuple[set[str], list[str]]:
    """The shared objects the processes have mapped (paths as they see them), and the pids whose
    maps could not be read."""
    paths: set[str] = set()
    unreadable: list[str] = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    parts = line.split(None, 5)
                    if len(parts) == 6 and ".so" in parts[5]:
                        paths.add(parts[5].strip())
        except OSError as exc:
            unreadable.append(f"{pid}: {type(exc).__name__}")
    return paths, unreadable


def _host_path(path: str, sandbox_root: str | None, host_root: Path) -> Path | None:
    """Where a path the worker sees lies on the host, if it is in the build slot."""
    roots = [str(host_root)] + ([sandbox_root] if sandbox_root else [])
    for root in roots:
        root = root.rstrip("/") + "/"
        if path.startswith(root):
            return host_root / path[len(root):]
    return None


def _names_in(path: Path, names: list[str]) -> list[str]:
    try:
        if path.stat().st_size > MAX_SO_BYTES:
            return []
        data = path.read_bytes()
    except OSError:
        return []
    return [n for n in names if n and n.encode() in data]


def extension_evidence(reported: list[str], *, worker_pid: int | None, build_root: Path,
                       sandbox_root: str | None) -> dict[str, Any]:
    """Whether an extension built in the slot is mapped in the worker and names what the
    profiled call reported."""
    report: dict[str, Any] = {"kind": "extension", "reported": reported[:20]}
    ext = build_root / "ext"
    built = sorted(str(p.relative_to(build_root)) for p in ext.rglob("*.so")
                   ) if ext.is_dir() else []
    report["built"] = built[:20]
    if worker_pid is not None:
        pids = process_tree(worker_pid)
        mapped, unreadable = mapped_objects(pids)
        in_slot = sorted({str(h) for p in mapped
                          if (h := _host_path(p, sandbox_root, build_root)) is not None})
        report["mapped"] = [str(Path(p).relative_to(build_root)) for p in in_slot][:20]
        if not pids or (unreadable and not mapped):
            # Gone, or not ours to read (not root beside another uid): the files alone.
            report["maps"] = "unreadable"
            candidates = [build_root / b for b in built]
        else:
            candidates = [Path(p) for p in in_slot]
    else:
        candidates = [build_root / b for b in built]
    named = sorted({n for p in candidates for n in _names_in(p, reported)})
    report["named"] = named
    if not candidates:
        report["missing"] = "no extension built from the source is loaded in its process"
    elif reported and not named:
        report["missing"] = "the reported functions are in no extension loaded from the slot"
    report["ok"] = "missing" not in report
    return report


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
        cache = build_root / "triton"
        compiled = {p.stem for p in cache.rglob("*") if p.suffix in (".cubin", ".json")
                    } if cache.is_dir() else set()
        report["compiled"] = sorted(n for n in ours if prefix + n in compiled)
        if not report["compiled"]:
            report["missing"] = "no compiled artifact of the reported kernels in the slot"
    report["ok"] = "missing" not in report
    return report


def _files_naming(folder: Path, names: dict[str, str]) -> set[str]:
    """The keys of `names` whose value some file under `folder` holds (bytes, any format: CUDA
    source, a library, MLIR bytecode, SQLite)."""
    found: set[str] = set()
    files = (p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()
             ) if folder.is_dir() else iter(())
    for count, path in enumerate(files):
        if count >= MAX_CACHE_FILES or len(found) == len(names):
            break
        left = {k: v for k, v in names.items() if k not in found}
        held = set(_names_in(path, list(left.values())))
        found.update(k for k, v in left.items() if v in held)
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
        found = _files_naming(build_root / folder, {n: device_names.get(n, n) for n in ours})
        report["compiled"] = sorted(found)
        if not found:
            report["missing"] = (f"no compiled artifact of the reported kernels in the slot's "
                                 f"{folder} cache")
    report["ok"] = "missing" not in report
    return report
