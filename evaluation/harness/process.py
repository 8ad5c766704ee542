"""Process helpers shared by the sandbox (runner side) and the judge: resource limits and log
capture. No torch import."""

from __future__ import annotations

import os
import resource
import threading
from typing import IO, Any

from .errors import TRUNCATION_MARKER, clean_text


def total_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


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
    fsize = limits.get("file_size_mb")
    return {
        "RLIMIT_AS": as_bytes,
        "RLIMIT_NOFILE": limits.get("open_files"),
        "RLIMIT_NPROC": limits.get("processes"),
        "RLIMIT_FSIZE": None if fsize is None else int(fsize) * 1024 * 1024,
        "RLIMIT_CORE": None if limits.get("core_dumps", False) else 0,
    }


def apply_limits(rlimits: dict[str, int | None]) -> dict[str, int]:
    """Set these limits on the calling process (soft and hard, lowering only), and return what
    was applied. Each process applies its own at start, before it runs anything untrusted: no
    preexec_fn, which is unsafe when the parent has threads (the runner may)."""
    applied: dict[str, int] = {}
    for name, value in rlimits.items():
        if value is None:
            continue
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
