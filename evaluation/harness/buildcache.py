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
import hashlib
import os
import shutil
import stat
import time
from pathlib import Path

ENTRY_MB = int(os.environ.get("KB_BUILD_ENTRY_MB", "512"))
ENTRY_FILES = int(os.environ.get("KB_BUILD_ENTRY_FILES", "20000"))
OWNER_MB = int(os.environ.get("KB_BUILD_OWNER_MB", "4096"))
SLOT_MB = int(os.environ.get("KB_BUILD_SLOT_MB", "2048"))
MB = 1024 * 1024


def entry_for(job: dict) -> Path | None:
    """The cache entry of this job's candidate, or None when the job keeps no cache."""
    root = job.get("build_dir")
    if not root:
        return None
    owner = str(job.get("build_owner") or "anonymous")
    owner_key = hashlib.sha256(owner.encode()).hexdigest()[:24]
    device_kind = "cpu" if job["device"] == "cpu" else "cuda"
    source_key = hashlib.sha256(
        "\0".join([job["candidate_source"], job["backend"], device_kind]).encode()
    ).hexdigest()
    return Path(root) / "owners" / owner_key / source_key


def usage(folder: Path, *, max_bytes: int, max_files: int) -> tuple[int, int, bool]:
    """(bytes, entries, over): a walk that stops as soon as either limit is passed. Links
    are counted, never followed."""
    total = count = 0
    stack = [folder]
    while stack:
        current = stack.pop()
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
                stack.append(Path(entry.path))
            else:
                total += st.st_blocks * 512
            if total > max_bytes or count > max_files:
                return total, count, True
    return total, count, False


def _copy_plain(src: Path, dst: Path, *, uid: int | None) -> None:
    """Copy folders and regular files only (never following a link), owned by `uid` when
    given (the candidate's, so that its build can update what it finds)."""
    dst.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(src):
        st = entry.stat(follow_symlinks=False)
        target = dst / entry.name
        if stat.S_ISDIR(st.st_mode):
            _copy_plain(Path(entry.path), target, uid=uid)
        elif stat.S_ISREG(st.st_mode):
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as fin, open(target, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
            os.chmod(target, st.st_mode & 0o755)
            os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
            if uid is not None:
                os.chown(target, uid, uid)
        # links, devices, fifos and sockets are left behind
    os.utime(dst, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns))
    if uid is not None:
        os.chown(dst, uid, uid)


def fill(slot: Path, entry: Path | None, *, uid: int | None) -> bool:
    """Copy the cache entry into the empty slot; True when there was one."""
    if entry is None or not entry.is_dir():
        return False
    try:
        _copy_plain(entry, slot, uid=uid)
        os.utime(entry)  # recently used
        return True
    except OSError:
        # A damaged entry: start from nothing, and let this evaluation's build replace it.
        for child in slot.iterdir():
            _remove(child)
        return False


def keep(slot: Path, entry: Path | None) -> str:
    """After the evaluation (every process dead): the slot replaces the cache entry when it is
    small enough. Returns what happened: "kept", "too_large", "empty" or "no_cache"."""
    if entry is None:
        return "no_cache"
    size, count, over = usage(slot, max_bytes=ENTRY_MB * MB, max_files=ENTRY_FILES)
    if over:
        _remove(entry)
        return "too_large"
    if count == 0:
        return "empty"
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = entry.parent / f".new-{entry.name}-{os.getpid()}-{time.monotonic_ns()}"
    try:
        _copy_plain(slot, staging, uid=None)
        _remove(entry)
        os.replace(staging, entry)
    finally:
        _remove(staging)
    evict(entry.parent, max_bytes=OWNER_MB * MB)
    return "kept"


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
        _remove(child)
        total -= size
        dropped.append(child.name)
    return dropped


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.is_symlink() or path.is_file():
            path.unlink()
        else:
            shutil.rmtree(path, ignore_errors=True)
