"""Timing: one method for candidate and reference, on the CPU and on a GPU.

An evaluation times one call at a time (`timed_call`), the same function in the candidate's
worker and for the reference in the judge; the loop around it, the inputs of every call and
the clock that bounds what the worker reports are the judge's (judge/clock.py). Validations and
baselines, which time only the trusted reference, run the whole loop here (`time_callable`).

Per timed call on a GPU: record an event, flush the L2 by writing a buffer larger than it (as
many times as it takes the host to launch the call, see below), record the start event, call,
record the end event, synchronise the whole device. The sample is the start-to-end event
interval. The host clock around the whole of it is kept too: work left running on another
stream (which the end event does not wait for, but the device-wide synchronise does) shows up as
host time beyond the first-to-end event interval. On the CPU the sample is time.perf_counter
around the call.

Why the flush runs between the events: with the device idle at the start event, the interval
also holds the host's time to launch the call (Python, the launcher of a Triton or extension
kernel), which varies with the load on the host's cores; for a kernel of a tenth of a
millisecond that moved medians of repeated evaluations by 30% on an H200. Launched right before
the call, the flush keeps the device busy while the host launches, so the call's work is queued
when the start event fires and the interval is the device's time alone. The warm-up measures the
host's launch time, and the flush is repeated until it covers that (within a cap). Work the call
starts on another stream without waiting for ours could run during the flush; it then competes
with the flush for memory bandwidth and lengthens it, so the flush's own interval (`prefix_ms`)
is reported for the judge to compare with the reference's.

Input sets rotate so a result cannot be cached per input, and repetitions continue until the
median is stable (its standard error below a share of it) or a cap is hit.

On the CPU both sides are timed with the same, fixed number of intra-op threads (one by
default). With several OpenMP threads, every parallel region waits for all of them to be
scheduled: on a host whose cores are busy with other work (other evaluations, tests, builds) a
region then takes milliseconds instead of microseconds, depending on the load at that moment.
As candidate and reference are timed one after the other, the load they met differed and their
ratio meant nothing (a kernel doing 21 times the reference's work was once reported 16.9 times
faster). One thread is delayed only when it is descheduled, which the median absorbs.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

_flush_buffers: dict[str, torch.Tensor] = {}
MAX_PREFIX_FLUSHES = 8  # a call that blocks the host on the device gains nothing from more


def l2_flush_buffer(device: str) -> torch.Tensor:
    """A buffer at least twice the device's L2 (and at least 256 MiB), allocated once."""
    buf = _flush_buffers.get(device)
    if buf is None:
        props = torch.cuda.get_device_properties(torch.device(device))
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        nbytes = max(2 * l2, 256 * 1024 * 1024)
        buf = torch.empty(nbytes // 4, dtype=torch.int32, device=device)
        _flush_buffers[device] = buf
    return buf


def _flushes_to_cover(flush: torch.Tensor, launch_ms: float, first: Any, second: Any,
                      sync: Callable[[], None]) -> int:
    """How many flushes keep the device busy while the host launches a call that takes
    `launch_ms` to return (with a margin), at least one, at most MAX_PREFIX_FLUSHES."""
    durations = []
    for _ in range(3):
        sync()
        first.record()
        flush.zero_()
        second.record()
        sync()
        durations.append(first.elapsed_time(second))
    one = max(min(durations), 1e-3)
    return max(1, min(MAX_PREFIX_FLUSHES, math.ceil((1.5 * launch_ms + 0.02) / one)))


def flush_ms(flush: torch.Tensor, device: str) -> float:
    """One flush's device time (ms): the judge's own measure of what a flush costs, to tell
    the flushes a worker says it made from the time it spent."""
    first = torch.cuda.Event(enable_timing=True)
    second = torch.cuda.Event(enable_timing=True)
    durations = []
    for _ in range(3):
        torch.cuda.synchronize(torch.device(device))
        first.record()
        flush.zero_()
        second.record()
        torch.cuda.synchronize(torch.device(device))
        durations.append(first.elapsed_time(second))
    return max(min(durations), 1e-3)


def flushes_for(one_flush_ms: float, launch_ms: float) -> int:
    """How many flushes keep the device busy while the host launches a call that takes
    `launch_ms` to return (with a margin), at least one, at most MAX_PREFIX_FLUSHES."""
    return max(1, min(MAX_PREFIX_FLUSHES, math.ceil((1.5 * launch_ms + 0.02) / one_flush_ms)))


class CallTimer:
    """One timed call, the same on both sides: on a GPU, the device idle first, `flushes` L2
    flushes (covering the host's launch, see the module doc), the call between two events, a
    device-wide synchronise; on the CPU, the host clock around the call. Returns the output and
    the facts: the sample, the flushes' device time, the host's launch time and wall time."""

    def __init__(self, device: str, flush_l2: bool = True):
        self.device = device
        self.on_gpu = device != "cpu"
        self.flush = l2_flush_buffer(device) if self.on_gpu and flush_l2 else None
        if self.on_gpu:
            self.events = [torch.cuda.Event(enable_timing=True) for _ in range(3)]

    def sync(self) -> None:
        if self.on_gpu:
            torch.cuda.synchronize(torch.device(self.device))

    def __call__(self, fn: Callable[..., Any], inputs: Sequence[Any],
                 flushes: int = 0) -> tuple[Any, dict[str, float]]:
        with torch.no_grad():
            if not self.on_gpu:
                t0 = time.perf_counter()
                out = fn(*inputs)
                t1 = time.perf_counter()
                ms = (t1 - t0) * 1e3
                return out, {"sample_ms": ms, "prefix_ms": 0.0, "launch_ms": ms, "wall_ms": ms}
            pre_ev, start_ev, end_ev = self.events
            self.sync()
            t0 = time.perf_counter()
            pre_ev.record()
            if self.flush is not None:
                for _ in range(max(0, min(int(flushes), MAX_PREFIX_FLUSHES))):
                    self.flush.zero_()
            start_ev.record()
            out = fn(*inputs)
            launched = time.perf_counter()
            end_ev.record()
            self.sync()
            t1 = time.perf_counter()
        return out, {"sample_ms": start_ev.elapsed_time(end_ev),
                     "prefix_ms": pre_ev.elapsed_time(start_ev),
                     "launch_ms": (launched - t0) * 1e3, "wall_ms": (t1 - t0) * 1e3}


def calibration_call(*inputs: Any) -> Any:
    """The call both sides make to calibrate the judge's path (judge/clock.py), in the worker
    before the candidate's code is loaded and in the judge: a copy of the first tensor input.
    Here, not in the judge's package, since the worker runs it too."""
    import torch

    for value in inputs:
        if isinstance(value, torch.Tensor):
            return value.clone()
    return None


def median_rel_err(samples: Sequence[float]) -> float:
    """Relative standard error of the median, from a robust spread (MAD), for the stop rule."""
    n = len(samples)
    if n < 3:
        return math.inf
    med = statistics.median(samples)
    if med <= 0:
        return math.inf
    mad = statistics.median(abs(x - med) for x in samples)
    sigma = 1.4826 * mad
    return 1.2533 * sigma / math.sqrt(n) / med


def is_stable(samples: Sequence[float], min_reps: int, target_rel_err: float) -> bool:
    """The stop rule: enough samples, and the median's relative standard error small enough."""
    return len(samples) >= min_reps and median_rel_err(samples) <= target_rel_err


def summarize(samples: Sequence[float]) -> dict[str, Any] | None:
    """The stored summary of a timing's samples. `mad_ms` (median absolute deviation) is the
    robust spread evaluation/stats.py builds the median's confidence interval from."""
    if not samples:
        return None
    med = statistics.median(samples)
    return {
        "median_ms": med,
        "mad_ms": statistics.median(abs(x - med) for x in samples),
        "mean_ms": statistics.fmean(samples),
        "std_ms": statistics.stdev(samples) if len(samples) > 1 else 0.0,
        "min_ms": min(samples),
        "max_ms": max(samples),
        "n": len(samples),
    }


def time_callable(
    fn: Callable[..., Any],
    input_sets: Sequence[Sequence[Any]],
    device: str,
    *,
    warmup: int = 3,
    min_reps: int = 20,
    max_reps: int = 500,
    target_rel_err: float = 0.0015,
    max_seconds: float = 10.0,
    flush_l2: bool = True,
    cpu_threads: int | None = 1,
    warmup_ms: float = 0.0,
    **_ignored: Any,
) -> dict[str, Any]:
    """Time `fn(*inputs)` over the input sets in rotation. Returns raw samples (ms) and facts.

    Called with the same arguments for the candidate (in the worker) and the reference (in the
    judge). Extra keyword arguments from the job's timing dict are ignored. `warmup_ms`: keep
    warming up until that much time has passed too (GPU clocks ramp up under load), within
    `max_reps` calls; `cpu_threads`: intra-op threads on the CPU (None or 0: leave as is).
    """
    if not input_sets:
        raise ValueError("no input sets to time with")
    on_gpu = device != "cpu"
    threads_before = torch.get_num_threads()
    threads = int(cpu_threads) if (cpu_threads and not on_gpu) else None
    if threads:
        torch.set_num_threads(threads)
    try:
        stats = _timed_loop(fn, input_sets, device, warmup=warmup, min_reps=min_reps,
                            max_reps=max_reps, target_rel_err=target_rel_err,
                            max_seconds=max_seconds, flush_l2=flush_l2, warmup_ms=warmup_ms)
    finally:
        if threads and torch.get_num_threads() != threads_before:
            torch.set_num_threads(threads_before)
    stats["threads"] = threads or threads_before
    if not on_gpu:
        from evaluator.environment import note

        note("timing_threads", stats["threads"])
    return stats


def _warm_up(fn: Callable[..., Any], input_sets: Sequence[Sequence[Any]],
             sync: Callable[[], None], *, warmup: int, warmup_ms: float,
             max_reps: int) -> tuple[list[float], list[float]]:
    """Untimed calls: at least `warmup`, and for at least `warmup_ms` (at most `max_reps`).
    Returns each call's time to completion and its host time until it returned (its launch
    cost, before synchronising)."""
    warmup_samples: list[float] = []
    launch: list[float] = []
    warm_start = time.perf_counter()
    i = 0
    while i < max(0, int(warmup)) or (
        (time.perf_counter() - warm_start) * 1e3 < warmup_ms and i < max_reps
    ):
        t0 = time.perf_counter()
        out = fn(*input_sets[i % len(input_sets)])
        launch.append((time.perf_counter() - t0) * 1e3)
        sync()
        warmup_samples.append((time.perf_counter() - t0) * 1e3)
        del out
        i += 1
    return warmup_samples, launch


def _timed_loop(
    fn: Callable[..., Any],
    input_sets: Sequence[Sequence[Any]],
    device: str,
    *,
    warmup: int,
    min_reps: int,
    max_reps: int,
    target_rel_err: float,
    max_seconds: float,
    flush_l2: bool,
    warmup_ms: float,
) -> dict[str, Any]:
    on_gpu = device != "cpu"
    n_sets = len(input_sets)
    flush = l2_flush_buffer(device) if on_gpu and flush_l2 else None

    def sync() -> None:
        if on_gpu:
            torch.cuda.synchronize(torch.device(device))

    samples: list[float] = []
    wall: list[float] = []
    prefix: list[float] = []
    flushes = 0
    stopped = "max_reps"
    with torch.no_grad():
        warmup_samples, launch = _warm_up(fn, input_sets, sync, warmup=warmup,
                                          warmup_ms=warmup_ms, max_reps=max_reps)
        if on_gpu:
            pre_ev, start_ev, end_ev = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            if flush is not None:
                flushes = _flushes_to_cover(flush, statistics.median(launch) if launch else 0.0,
                                            pre_ev, start_ev, sync)
            sync()
        loop_start = time.perf_counter()
        for rep in range(max(1, int(max_reps))):
            inputs = input_sets[rep % n_sets]
            if on_gpu:
                # What the previous call left queued (the recorder's fresh draw of its inputs)
                # finishes first, outside the host interval too.
                sync()
                t0 = time.perf_counter()
                pre_ev.record()
                for _ in range(flushes):
                    flush.zero_()
                start_ev.record()
                out = fn(*inputs)
                end_ev.record()
                sync()
                t1 = time.perf_counter()
                samples.append(start_ev.elapsed_time(end_ev))
                prefix.append(pre_ev.elapsed_time(start_ev))
            else:
                t0 = time.perf_counter()
                out = fn(*inputs)
                t1 = time.perf_counter()
                samples.append((t1 - t0) * 1e3)
                prefix.append(0.0)
            wall.append((t1 - t0) * 1e3)
            del out
            n = len(samples)
            if is_stable(samples, min_reps, target_rel_err):
                stopped = "stable"
                break
            if time.perf_counter() - loop_start > max_seconds and n >= min(3, max_reps):
                stopped = "max_seconds"
                break
    return {
        "samples_ms": samples,
        "wall_ms": wall,
        "prefix_ms": prefix,
        "flushes": flushes,
        "launch_ms": statistics.median(launch) if launch else 0.0,
        "warmup_ms": warmup_samples,
        "n": len(samples),
        "input_sets": n_sets,
        "stopped": stopped,
        "rel_err": median_rel_err(samples),
    }
