"""The build cache: compiled extensions and Triton kernels kept between evaluations.

What a candidate's process writes is the candidate's: so a cache entry belongs to one owner and
one exact source, and no candidate ever holds a writable handle on the cache itself.

- An entry is `<root>/owners/<owner key>/<source key>/`, keyed by the owner (a user or a model)
  and the full hash of the source, backend and device kind.
- Each evaluation's worker gets a fresh, empty slot folder (its only writable host folder,
  mounted at /kb/build in its sandbox). The runner copies the entry into it before the job
  starts, and copies the slot back over the entry once every process of the evaluation is dead.
- What comes back is only plain folders and regular files (no links, devices or fifos), and
  only when the slot stays under `ENTRY_MB` and `ENTRY_FILES`; otherwise the entry is dropped.
  While the evaluation runs the runner watches the slot and stops an evaluation whose slot
  outgrows `SLOT_MB`. Each owner keeps at most `OWNER_MB`, least recently used entries first
  out.

So the worst a candidate can do to the cache is spoil its own owner's entry for its own source:
another user's build is never mounted, readable or writable in its sandbox.

Plain Python (the runner side of the harness); no torch, no Django.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

ENTRY_MB = int(os.environ.get("KB_BUILD_ENTRY_MB", "512"))
ENTRY_FILES = int(os.environ.get("KB_BUILD_ENTRY_FILES", "20000"))
OWNER_MB = int(os.environ.get("KB_BUILD_OWNER_MB", "4096"))
SLOT_MB = int(os.environ.get("KB_BUILD_SLOT_MB", "2048"))
MB = 1024 * 1024


def entry_for(job: dict) -> Path | None:
    """The cache entry of this job's candidate, or None when the job keeps no cache."""
    root = job.get("build_dir")
    if not root or not isinstance(job.get("candidate_source"), str):
        return None  # no cache asked for, or a job without a candidate (validation, baselines)
    owner = str(job.get("build_owner") or "anonymous")
    owner_key = hashlib.sha256(owner.encode()).hexdigest()[:24]
    device_kind = "cpu" if job["device"] == "cpu" else "cuda"
    source_key = hashlib.sha256(
        "\0".join([job["candidate_source"], job["backend"], device_kind]).encode()
    ).hexdigest()
    return Path(root) / "owners" / owner_key / source_key


MAX_DEPTH = 64  # folders deeper than this make a slot "over": no build needs them


def usage(folder: Path, *, max_bytes: int, max_files: int) -> tuple[int, int, bool]:
    """(bytes, entries, over): a walk that stops as soon as a limit is passed. A file counts by
    its length or its blocks, whichever is larger (a sparse file is short on disk but would be
    written out in full); links are counted, never followed; no recursion."""
    total = count = 0
    stack = [(str(folder), 0)]
    while stack:
        current, depth = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            count += 1
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if depth + 1 > MAX_DEPTH:
                    return total, count, True
                stack.append((entry.path, depth + 1))
            else:
                total += max(st.st_size, st.st_blocks * 512)
            if total > max_bytes or count > max_files:
                return total, count, True
    return total, count, False


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _copy_plain(src: Path, dst: Path, *, uid: int | None, budget: int) -> None:
    """Copy folders and regular files only, at most `budget` bytes, owned by `uid` when given
    (the candidate's, so that its build can update what it finds).

    The source may be the candidate's: everything is opened relative to an already opened
    folder, without following links and without blocking, and checked after opening (fstat),
    so a link or fifo swapped in meanwhile is skipped, never followed. No recursion."""
    dst.mkdir(parents=True, exist_ok=True)
    root_fd = os.open(src, _DIR_FLAGS)
    stack = [(root_fd, dst)]
    try:
        while stack:
            dir_fd, target_dir = stack.pop()
            try:
                names = os.listdir(dir_fd)
                for name in names:
                    try:
                        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
                    except OSError:
                        continue  # a link (ELOOP), or gone
                    st = os.fstat(fd)
                    target = target_dir / name
                    if stat.S_ISDIR(st.st_mode):
                        os.close(fd)
                        sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
                        target.mkdir(exist_ok=True)
                        if uid is not None:
                            os.chown(target, uid, uid)
                        stack.append((sub, target))
                        continue
                    if not stat.S_ISREG(st.st_mode):
                        os.close(fd)
                        continue  # devices, fifos, sockets stay behind
                    budget -= max(st.st_size, st.st_blocks * 512)
                    if budget < 0:
                        os.close(fd)
                        raise OSError(errno.EFBIG, "the build is larger than the cache takes")
                    os.set_blocking(fd, True)
                    with os.fdopen(fd, "rb") as fin, open(target, "wb") as fout:
                        shutil.copyfileobj(fin, fout, 1 << 20)
                    os.chmod(target, st.st_mode & 0o755)
                    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
                    if uid is not None:
                        os.chown(target, uid, uid)
            finally:
                os.close(dir_fd)
    finally:
        for fd, _ in stack:
            os.close(fd)
    if uid is not None:
        os.chown(dst, uid, uid)


def fill(slot: Path, entry: Path | None, *, uid: int | None) -> bool:
    """Copy the cache entry into the empty slot; True when there was one."""
    if entry is None or not entry.is_dir():
        return False
    try:
        _copy_plain(entry, slot, uid=uid, budget=ENTRY_MB * MB)
        os.utime(entry)  # recently used
        return True
    except OSError:
        # A damaged entry: start from nothing, and let this evaluation's build replace it.
        for child in slot.iterdir():
            remove_tree(child)
        return False


def keep(slot: Path, entry: Path | None) -> str:
    """After the evaluation (every process dead): the slot replaces the cache entry when it is
    small enough. Returns what happened: "kept", "too_large", "empty" or "no_cache"."""
    if entry is None:
        return "no_cache"
    size, count, over = usage(slot, max_bytes=ENTRY_MB * MB, max_files=ENTRY_FILES)
    if over:
        remove_tree(entry)
        return "too_large"
    if count == 0:
        return "empty"
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = entry.parent / f".new-{entry.name}-{os.getpid()}-{time.monotonic_ns()}"
    try:
        _copy_plain(slot, staging, uid=None, budget=ENTRY_MB * MB)
        remove_tree(entry)
        os.replace(staging, entry)
    except OSError:
        remove_tree(entry)  # grew while copied, or unreadable: keep nothing of it
        return "too_large"
    finally:
        remove_tree(staging)
    evict(entry.parent, max_bytes=OWNER_MB * MB)
    return "kept"


def module_loaded(result: Any) -> bool:
    """Whether the judge's result says the candidate's module was loaded, its build done (the
    worker's load reply carries `compiled` once the module's import has returned)."""
    compiled = result.get("compile") if isinstance(result, dict) else None
    return isinstance(compiled, dict) and compiled.get("compiled") is not None


def evict(owner_dir: Path, *, max_bytes: int) -> list[str]:
    """Drop the owner's least recently used entries until the owner is under `max_bytes`."""
    entries = []
    for child in owner_dir.iterdir():
        if child.name.startswith(".") or not child.is_dir():
            continue
        size, _, _ = usage(child, max_bytes=1 << 62, max_files=1 << 62)
        entries.append((child.stat().st_mtime, size, child))
    entries.sort()
    total = sum(size for _, size, _ in entries)
    dropped = []
    for _, size, child in entries:
        if total <= max_bytes:
            break
        remove_tree(child)
        total -= size
        dropped.append(child.name)
    return dropped


def remove_tree(path: Path) -> None:
    """Remove a file or a whole folder, however deep, without recursion and without following
    links (the folder may be the candidate's slot); never raises."""
    path = Path(path)
    with contextlib.suppress(OSError):
        if path.is_symlink() or not path.is_dir():
            path.unlink()
            return
    # Depth first, by an explicit stack of folders still to empty; a folder is emptied once
    # (one that cannot be removed is left, and not visited again).
    stack, done = [str(path)], set()
    while stack:
        current = stack[-1]
        try:
            entries = list(os.scandir(current))
        except OSError:
            entries = []
        pushed = False
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.path not in done:
                        stack.append(entry.path)
                        pushed = True
                else:
                    os.unlink(entry.path)
            except OSError:
                continue
        if not pushed:
            stack.pop()
            done.add(current)
            with contextlib.suppress(OSError):
                os.rmdir(current)
