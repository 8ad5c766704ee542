"""What the device was doing while a timing window was open, from the driver's side (NVML, through
nvidia-ml-py): its SM and memory clocks, power and temperature at the window's two ends, and how
many processes the driver saw computing on it during the window, told apart as the judge itself,
processes below the judge (the worker and anything the candidate started), and others.

The gate (gate.py) stands every other evaluation's candidate processes still for the window, but
it only reaches the processes the runner named to it; the driver sees every process on the device.
What it saw is kept with the timing (`device_seen`) and shown to the owner as counts, never pids.
It decides nothing yet: the driver publishes a process's samples at the end of each sampling
period (a sixth of a second to a second), averaged over it, so a window's record can include a
neighbour's last busy period from just before the gate stopped it and miss the window's own last
period. Retiming on it waits for that lag to be measured on the GPU hosts.

Pids are compared only when the driver numbers processes as the judge does: the judge times the
reference inside the window, so its own pid must be among the window's samples (a judge in a pid
namespace the driver does not translate into is not; `comparable` false then, and the counts
are kept but mean little).

No Django. Without nvidia-ml-py, on a CPU, or where the driver refuses a reading, nothing is
sampled and the reason is kept.
"""

from __future__ import annotations

import os
import time
from typing import Any

from evaluator.process import process_tree

# pynvml's return codes that mean "no sample newer than the timestamp" (its wrapper raises
# NVMLError(NVML_SUCCESS) when the first call reports zero samples).
_NONE = {0, 6}  # NVML_SUCCESS, NVML_ERROR_NOT_FOUND


def _nvml() -> Any:
    """The pynvml module, initialised; raises ImportError or its NVMLError."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def _handle(nvml: Any, device: Any) -> Any:
    """The NVML handle of torch's `device`: NVML numbers devices without CUDA_VISIBLE_DEVICES,
    so the device is found by its UUID (torch gives it bare, NVML wants "GPU-" before it)."""
    import torch

    uuid = str(torch.cuda.get_device_properties(device).uuid)
    if not uuid.startswith(("GPU-", "MIG-")):
        uuid = f"GPU-{uuid}"
    return nvml.nvmlDeviceGetHandleByUUID(uuid.encode())


def below_judge() -> set[int]:
    """The processes below this one (the worker and whatever the candidate started in its
    sandbox), as this process numbers them."""
    return set(process_tree(os.getpid()))


class NotSampled(Exception):
    """The driver refused the window's samples: the window's record says why."""


class DeviceWatch:
    """Open around one timing window, closed after it: `close()` returns what the driver saw."""

    def __init__(self, device: Any, *, nvml: Any = None, handle: Any = None,
                 below: Any = below_judge):
        self.nvml = nvml
        self.handle = None
        self.why_not: str | None = None
        self.below = below  # a function: the processes below the judge change
        self._since = 0
        self._opened_us = 0
        self._start: dict[str, Any] = {}
        if str(device).startswith("cpu"):
            self.why_not = "a CPU: the driver samples GPUs only"
            return
        try:
            self.nvml = nvml if nvml is not None else _nvml()
            self.handle = handle if handle is not None else _handle(self.nvml, device)
        except ImportError:
            self.why_not = "nvidia-ml-py is not installed"
        except Exception as exc:  # NVMLError and its kin: no driver library, no permission
            self.why_not = f"NVML: {exc}"[:200]

    @property
    def sampling(self) -> bool:
        return self.handle is not None

    def _state(self) -> dict[str, Any]:
        """Clocks (MHz), power (W, the driver's recent average) and temperature (C) now; a
        reading the device refuses is left out."""
        n, h = self.nvml, self.handle
        readings = {
            "sm_clock_mhz": lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
            "memory_clock_mhz": lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
            "power_w": lambda: round(n.nvmlDeviceGetPowerUsage(h) / 1000, 1),
            "temperature_c": lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
        }
        state: dict[str, Any] = {}
        for name, read in readings.items():
            try:
                state[name] = read()
            except Exception:  # a reading this device does not offer
                continue
        return state

    def _samples(self, since: int) -> list[Any]:
        """The driver's per-process samples newer than `since` (its timestamps); none is an
        empty list, any other refusal (not supported, no permission, a lost GPU) NotSampled."""
        try:
            return list(self.nvml.nvmlDeviceGetProcessUtilization(self.handle, since))
        except Exception as exc:
            if getattr(exc, "value", None) in _NONE:
                return []
            raise NotSampled(f"NVML: {exc}"[:200]) from exc

    def open(self) -> None:
        """The window opens: the newest sample already published marks where the window's own
        begin (samples are published at the end of their period, so the first one read at
        close may have begun before the window)."""
        if not self.sampling:
            return
        self._opened_us = time.time_ns() // 1000
        try:
            self._since = max((s.timeStamp for s in self._samples(0)), default=0)
        except NotSampled as exc:
            self.why_not = str(exc)
        self._start = self._state()

    def close(self) -> dict[str, Any]:
        """What the window saw: the device's state at its two ends, and the processes that used
        its SMs, counted: the judge, processes below it, others (no pids are kept)."""
        if not self.sampling or self.why_not:
            return {"sampled": False, "why": self.why_not}
        closed_us = time.time_ns() // 1000
        try:
            samples = self._samples(self._since)
        except NotSampled as exc:
            return {"sampled": False, "why": str(exc)}
        me, below = os.getpid(), self.below()
        busy = {s.pid: int(s.smUtil) for s in samples if s.smUtil > 0}
        others = [util for pid, util in busy.items() if pid != me and pid not in below]
        return {
            "sampled": True,
            "start": self._start,
            "end": self._state(),
            "window_ms": round((closed_us - self._opened_us) / 1000, 1),
            "samples": len(samples),
            "below_judge_busy": sum(1 for pid in busy if pid in below),
            "others": len(others),
            "others_max_sm_util_pct": max(others, default=0),
            "comparable": any(s.pid == me for s in samples),
        }
