"""What the evaluation ran on: device, driver, software versions, host."""

from __future__ import annotations

import importlib.metadata
import platform
import socket
from pathlib import Path
from typing import Any


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _nvidia_driver() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    for token in text.split():
        # "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  ..."
        if token.count(".") >= 1 and token.replace(".", "").isdigit():
            return token
    return None


# The environment dict of this process's evaluation (the judge's), so that parts that learn
# something later (how tensors travelled, the timing threads) can add it to the result.
_current: dict[str, Any] | None = None


def note(key: str, value: Any) -> None:
    """Record a fact in the current evaluation's environment (no-op before collect())."""
    if _current is not None:
        _current[key] = value


def collect(device: str) -> dict[str, Any]:
    global _current
    import torch

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": _version("triton"),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "device": device,
    }
    if device == "cpu":
        env["device_name"] = env["cpu"]
        env["arch"] = platform.machine()
        env["torch_threads"] = torch.get_num_threads()
    else:
        dev = torch.device(device)
        props = torch.cuda.get_device_properties(dev)
        env.update({
            "device_name": props.name,
            "arch": f"sm_{props.major}{props.minor}",
            "device_memory_bytes": int(props.total_memory),
            "multiprocessors": int(props.multi_processor_count),
            "l2_bytes": int(getattr(props, "L2_cache_size", 0) or 0),
            "driver": _nvidia_driver(),
            "cudnn": torch.backends.cudnn.version(),
        })
    _current = env
    return env
