"""Turning exceptions, signals and logs into short, readable result fields. No torch import."""

from __future__ import annotations

import re
import signal
import traceback

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

TRUNCATION_MARKER = "\n[... {n} bytes truncated ...]\n"

_OOM_PATTERNS = (
    "out of memory",
    "can't allocate memory",
    "cannot allocate memory",
    "std::bad_alloc",
)


def clean_text(text: str) -> str:
    """Strip terminal escapes and control characters (logs are shown in a browser)."""
    return _CONTROL.sub("", _ANSI.sub("", text))


def truncate(text: str, limit: int) -> str:
    """Keep the head and tail of `text` within about `limit` characters, with a marker."""
    if len(text) <= limit:
        return text
    half = max(limit // 2, 1)
    cut = len(text) - 2 * half
    return text[:half] + TRUNCATION_MARKER.format(n=cut) + text[-half:]


def signal_name(returncode: int) -> str | None:
    """'SIGSEGV' for a process killed by signal 11 (returncode -11, or 128+11 from a shell)."""
    if returncode < 0:
        num = -returncode
    elif returncode > 128 and returncode - 128 < 65:
        num = returncode - 128
    else:
        return None
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    if type(exc).__name__ == "OutOfMemoryError":  # torch.OutOfMemoryError / cuda
        return True
    msg = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(p in msg for p in _OOM_PATTERNS)


def short_message(exc: BaseException, limit: int = 2000) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return truncate(clean_text(text), limit)


def trimmed_traceback(exc: BaseException, keep: tuple[str, ...], limit: int = 8000) -> str:
    """The traceback reduced to frames in the candidate's files (`keep`: filename substrings)
    and the exception itself; harness frames say nothing useful to a submitter."""
    frames = traceback.extract_tb(exc.__traceback__)
    kept = [f for f in frames if any(k in (f.filename or "") for k in keep)]
    lines = ["Traceback (most recent call last):\n"] if kept else []
    lines += traceback.format_list(kept)
    lines += traceback.format_exception_only(type(exc), exc)
    return truncate(clean_text("".join(lines)), limit)


# What a reference needs that a runner may lack: a Python package (level 4 imports
# transformers), or model configs and weights from the Hugging Face hub, which runners never
# download (they run offline: HF_HUB_OFFLINE) and read from their HF_HOME folder.
_HUB_SIGNS = ("huggingface", "hugging face", "hf_hub", "offline mode", "can't load",
              "couldn't connect", "local_files_only", "cannot find the requested files")


def unavailable_reason(exc: BaseException) -> str | None:
    """Why this runner cannot run the problem at all (not the kernel's fault), in plain words;
    None when `exc` is an ordinary failure."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return (f"This runner cannot run the problem: its reference imports the Python package "
                f"{exc.name.split('.')[0]!r}, which is not installed here.")
    text = str(exc).lower()
    if isinstance(exc, (OSError, ValueError)) and any(sign in text for sign in _HUB_SIGNS):
        return ("This runner cannot run the problem: its reference loads a model from the "
                "Hugging Face hub, and this runner has no local copy of it (runners are offline; "
                "the operator puts the models' configs in the runner's HF_HOME folder). "
                f"{short_message(exc, 300)}")
    return None
