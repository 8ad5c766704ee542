"""What the device was doing while a timing window was open, from the driver's side (NVML, through
nvidia-ml-py): its SM and memory clocks, power and temperature at the window's two ends, and the
processes the driver saw computing on it during the window.

The gate (gate.py) stands every other evaluation's candidate processes still for the window, but
it only reaches the processes the runner named to it. The driver sees every process on the device,
whoever started it: a frozen process's queued work still draining, another runner's evaluation, a
host job. A window in which a process other than this evaluation's own (the judge and every
process below it: the worker, its children, the profiling worker) used the device is timed again
(timed.py), and what each window saw is kept with the timing.

The driver numbers processes as the host does. Where the judge cannot number them alike (a judge
in a container whose pid namespace is not the host's), the driver's list of compute processes
lacks the judge's own pid while the judge holds a CUDA context: the processes seen are then kept
as counts but decide nothing (`comparable` false), rather than timing every window again.

No Django. Without nvidia-ml-py, or on a CPU, nothing is sampled and the reason is kept.
"""

from __future__ import annotations

import os
from typing import Any

from evaluator.judge.evidence import process_tree


def _nvml() -> Any:
    """The pynvml module, initialised; raises ImportError or its NVMLError."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def _handle(nvml: Any, device: Any) -> Any:
    """The NVML handle of torch's `device`: NVML numbers devices without CUDA_VISIBLE_DEVICES,
    so the device is found by its UUID."""
    import torch

    uuid = str(torch.cuda.get_device_properties(device).uuid)
    if not uuid.startswith(("GPU-", "MIG-")):
        uuid = f"GPU-{uuid}"
    return nvml.nvmlDeviceGetHandleByUUID(uuid.encode())


def own_pids() -> set[int]:
    """This process and every process below it, as this process numbers them."""
    me = os.getpid()
    return {me, *process_tree(me)}


class DeviceWatch:
    """Open around one timing window, closed after it: `close()` returns what the driver saw."""

    def __init__(self, device: Any, *, nvml: Any = None, handle: Any = None,
                 pids: Any = own_pids):
        self.nvml = nvml
        self.handle = None
        self.why_not: str | None = None
        self.pids = pids  # this evaluation's own processes (a function: they change)
        self._since = 0
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
        """Clocks (MHz), power (W) and temperature (C) now; a reading the device refuses is
        left out."""
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
        """The driver's per-process samples newer than `since` (its own timestamps)."""
        try:
            return list(self.nvml.nvmlDeviceGetProcessUtilization(self.handle, since))
        except Exception:  # NOT_FOUND: no sample in that time; NOT_SUPPORTED: none ever
            return []

    def open(self) -> None:
        """The window opens: the newest sample so far marks where its own samples begin (the
        driver's timestamps, whatever their origin; none yet: every later one is the window's)."""
        if not self.sampling:
            return
        self._since = max((s.timeStamp for s in self._samples(0)), default=0)
        self._start = self._state()

    def close(self) -> dict[str, Any]:
        """What the window saw: the device's state at its two ends, the processes other than
        this evaluation's that used the device's SMs, and whether pids could be compared."""
        if not self.sampling:
            return {"sampled": False, "why": self.why_not}
        end = self._state()
        ours = self.pids()
        busy: dict[int, int] = {}
        for s in self._samples(self._since):
            if s.smUtil > 0 and s.pid not in ours:
                busy[s.pid] = max(busy.get(s.pid, 0), int(s.smUtil))
        comparable = self._comparable(ours)
        return {
            "sampled": True,
            "start": self._start,
            "end": end,
            "others": [{"pid": pid, "sm_util_pct": util} for pid, util in sorted(busy.items())],
            "comparable": comparable,
        }

    def _comparable(self, ours: set[int]) -> bool:
        """Whether the driver numbers processes as this judge does: it lists the judge (which
        holds a CUDA context) among the device's compute processes."""
        try:
            running = self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)
        except Exception:
            return False
        return os.getpid() in {p.pid for p in running}


def disturbed(seen: dict[str, Any] | None) -> bool:
    """Whether a window must be timed again: another process used the device during it, as far
    as the driver could tell this judge."""
    return bool(seen and seen.get("sampled") and seen.get("comparable") and seen.get("others"))


def describe(seen: dict[str, Any] | None) -> str | None:
    """One line on what the driver saw during the timing window that counted, for the owner
    (the processes counted, never their pids); None where nothing was sampled."""
    if not isinstance(seen, dict) or not seen.get("sampled"):
        return None
    parts = []
    for name, unit, label in (("sm_clock_mhz", "MHz", "SM clock"),
                              ("memory_clock_mhz", "MHz", "memory clock"),
                              ("power_w", "W", "power"), ("temperature_c", "°C", "temperature")):
        ends = [(seen.get(end) or {}).get(name) for end in ("start", "end")]
        ends = [v for v in ends if isinstance(v, int | float)]
        if ends:
            span = f"{ends[0]:g}" if len(set(ends)) == 1 else f"{ends[0]:g} to {ends[-1]:g}"
            parts.append(f"{label} {span} {unit}")
    others = len(seen.get("others") or [])
    counted = f"{others} other process{'es' if others != 1 else ''}"
    if not seen.get("comparable"):
        company = f"{counted} seen, which the judge cannot tell from its own"
    elif others:
        company = f"{counted} used it"
    else:
        company = "no other process used it"
    return "; ".join([*parts, company])
