"""The judge's side of timing: the loop, every call's inputs, and the clock that bounds what the
worker reports (the judge runs this; nothing here runs in the candidate's process).

Everything in the candidate's process (its stack, the worker's objects, its memory) is the
candidate's to read and rewrite, so the timing loop cannot live there:

- Inputs. Every call's inputs are a fresh draw from the problem's own get_inputs() that the
  judge makes under seeds that never leave it, and sends with the call that uses them. No draw
  function, seed or future input exists in the worker, so no answer can be computed ahead.
- The clock. The judge's own clock runs from the moment it starts sending a call's inputs to the
  moment the reply, with the whole output, is in. The worker's figure for the call (the device
  events around it, or its host clock on the CPU) is what ranks, but only while the judge's
  interval explains it: what the interval holds beyond the reported call (the transfers, the
  flushes, the synchronisation, the channel) must match what the same path costs the reference,
  timed here by the same `CallTimer` with the same copies, plus the channel's round trip
  measured before the candidate's code was loaded. A worker that reports less than it spent
  leaves that much unexplained.
- Outputs. Each timed call's whole output comes back inside the interval, and the judge samples
  and sums it with a seed of its own, against the reference on the same draw.

When the two clocks disagree the candidate and the reference are timed again; a disagreement
that stays keeps the result off the boards with a note (flags.TIMING_UNCONFIRMED), never an
exploit flag: a loaded host delays the judge's side too.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evaluator.timing import MAX_PREFIX_FLUSHES, flushes_for, is_stable, median_rel_err

# A call's (facts, output) for these inputs and that many flushes.
Call = Callable[[list, int], tuple[dict, Any]]
Draw = Callable[[int, int], list]  # (input set j, use k) -> that use's inputs
# Summarise an output for the checks: (facts per leaf, sampled values).
Summarize = Callable[[Any], tuple[list[dict], Any]]

# What the judge lets pass beyond the path's expected cost: a floor (ms), a share of the call,
# a share of the worker path's own cost (which drifts with the host's load between the
# calibration and the timing), and this many standard errors of the medians compared.
ABS_TOLERANCE_MS = 0.01
REL_TOLERANCE = 0.1
PATH_TOLERANCE = 0.25
STANDARD_ERRORS = 4.0
# On a CPU runner the worker's path is host work throughout, which the host's load stretches
# unevenly between the calibration and the timing: looser there, where calls take milliseconds
# anyway. (Twice the path's cost was allowed while the judge's copies ran on two intra-op
# threads that a busy host kept waiting, 30 ms a call at times; on the timed calls' one thread
# the calibration agreed with the timing within 0.4 ms on a busy 2-core host.)
CPU_REL_TOLERANCE = 0.25
CPU_PATH_TOLERANCE = 1.0
PINGS = 24


def se_median(values: list[float]) -> float:
    """The standard error of a median, from a robust spread (MAD)."""
    n = len(values)
    if n < 3:
        return math.inf if n else 0.0
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    return 1.2533 * 1.4826 * mad / math.sqrt(n)


@dataclass
class Side:
    """One side's timed calls as the judge saw them."""

    samples: list[float] = field(default_factory=list)  # the worker's figure per timed call
    prefix: list[float] = field(default_factory=list)  # its flushes' device time
    wall: list[float] = field(default_factory=list)  # its host time around the call
    judge: list[float] = field(default_factory=list)  # the judge's interval per timed call
    warmup: list[float] = field(default_factory=list)  # the judge's interval per warm-up call
    launch: list[float] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)  # per call: set, use, output facts
    outputs: list[Any] = field(default_factory=list)  # per call: the sampled values
    echo: list[float] = field(default_factory=list)  # the host's round trip beside each call
    flushes: int = 0
    stopped: str = "max_reps"

    def stats(self) -> dict[str, Any]:
        return {
            "samples_ms": self.samples, "wall_ms": self.wall, "prefix_ms": self.prefix,
            "judge_ms": self.judge, "warmup_ms": self.warmup, "flushes": self.flushes,
            "launch_ms": statistics.median(self.launch) if self.launch else 0.0,
            "n": len(self.samples), "stopped": self.stopped,
            "rel_err": median_rel_err(self.samples),
        }


def _number(value: Any) -> float | None:
    """A figure from the worker: a finite, non-negative float, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


class TimingLoop:
    """Times one side call by call: warm-up, then timed calls until the median is stable or a
    cap is hit. The judge makes each call's inputs just before it (outside its interval)."""

    def __init__(self, draw: Draw, n_sets: int, summarize: Summarize, *, sync: Callable[[], None],
                 one_flush_ms: float, on_gpu: bool, warmup: int = 3, min_reps: int = 20,
                 max_reps: int = 500, target_rel_err: float = 0.0015, max_seconds: float = 10.0,
                 warmup_ms: float = 0.0, echo: Any = None, **_ignored: Any):
        self.draw, self.n_sets, self.summarize, self.sync = draw, max(1, n_sets), summarize, sync
        self.one_flush_ms, self.on_gpu = one_flush_ms, on_gpu
        self.warmup, self.min_reps, self.max_reps = int(warmup), int(min_reps), int(max_reps)
        self.target_rel_err, self.max_seconds = target_rel_err, max_seconds
        self.warmup_ms = warmup_ms
        self.echo = echo  # Echo: the host's round trip, sampled after each timed call
        self.uses = [0] * self.n_sets
        self.count = 0

    def _next_inputs(self) -> tuple[int, int, list]:
        j = self.count % self.n_sets
        k = self.uses[j]
        self.uses[j] = k + 1
        self.count += 1
        inputs = self.draw(j, k)
        self.sync()  # drawn before the interval opens
        return j, k, inputs

    def _one(self, call: Call, side: Side, flushes: int) -> tuple[dict, float]:
        j, k, inputs = self._next_inputs()
        t0 = time.perf_counter()
        facts, out = call(inputs, flushes)
        judge_ms = (time.perf_counter() - t0) * 1e3
        del inputs
        infos, sampled = self.summarize(out)
        del out
        side.records.append({"c": len(side.records), "j": j, "k": k, "outputs": infos,
                             **{key: facts[key] for key in ("alias_input", "reused_from",
                                                            "candidate_threads", "tasks")
                                if key in facts}})
        side.outputs.append(sampled)
        return facts, judge_ms

    def run(self, call: Call, side: Side | None = None, *, flushes: int | None = None) -> Side:
        """Time `call`; `flushes` fixed (a re-timing) or chosen from the warm-up's launch time."""
        side = side or Side()
        warm_start = time.perf_counter()
        i = 0
        while i < max(0, self.warmup) or (
                (time.perf_counter() - warm_start) * 1e3 < self.warmup_ms and i < self.max_reps):
            facts, judge_ms = self._one(call, side, 0)
            side.warmup.append(judge_ms)
            launch = _number(facts.get("launch_ms"))
            side.launch.append(min(launch if launch is not None else judge_ms, judge_ms))
            i += 1
        if flushes is None:
            launch = statistics.median(side.launch) if side.launch else 0.0
            flushes = flushes_for(self.one_flush_ms, launch) if self.on_gpu else 0
        side.flushes = max(0, min(int(flushes), MAX_PREFIX_FLUSHES))
        loop_start = time.perf_counter()
        for _ in range(max(1, self.max_reps)):
            facts, judge_ms = self._one(call, side, side.flushes)
            sample = _number(facts.get("sample_ms"))
            side.samples.append(sample if sample is not None else judge_ms)
            side.prefix.append(_number(facts.get("prefix_ms")) or 0.0)
            side.wall.append(_number(facts.get("wall_ms")) or judge_ms)
            side.judge.append(judge_ms)
            if self.echo is not None:
                side.echo.append(self.echo.ping())
            if is_stable(side.samples, self.min_reps, self.target_rel_err):
                side.stopped = "stable"
                break
            if (time.perf_counter() - loop_start > self.max_seconds
                    and len(side.samples) >= min(3, self.max_reps)):
                side.stopped = "max_seconds"
                break
        return side


def excess(side: Side, one_flush_ms: float) -> list[float]:
    """Per timed call, what the judge's interval holds beyond the reported call and the flushes
    it was asked to make (whose device time the judge measured itself)."""
    return [j - s - side.flushes * one_flush_ms
            for j, s in zip(side.judge, side.samples, strict=False)]


_ECHO = "import os\nwhile os.read(0, 1):\n    os.write(1, b'.')\n"


class Echo:
    """A process of the judge's own (no candidate code, no torch) that answers a byte with a
    byte: its round trip is what waking another process costs on this host right now. Sampled
    at the calibration and beside every timed call, it tells how much of a change in the
    worker's round trip is the host's load (a separate process's observation, which nothing in
    the candidate's process can lengthen or shorten)."""

    def __init__(self) -> None:
        import subprocess
        import sys

        from evaluator import launcher

        self.proc = launcher.start_trusted([sys.executable, "-S", "-c", _ECHO],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           bufsize=0)
        self.ping()  # started and answering

    def ping(self) -> float:
        import os

        t0 = time.perf_counter()
        os.write(self.proc.stdin.fileno(), b".")
        if not os.read(self.proc.stdout.fileno(), 1):
            raise OSError("the judge's echo process ended")
        return (time.perf_counter() - t0) * 1e3

    def close(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except Exception:
            pass


class LocalPath:
    """The judge's side of a call: what the channel does to a candidate's inputs and outputs
    (a copy into the sender's buffer and one out of it on the other side, each synchronised),
    done here around the same timed call, so the reference pays the same path."""

    def __init__(self, timer: Any):
        self.timer = timer

    def mirror(self, value: Any) -> Any:
        """A copy of `value`, made as the channel makes it: written twice (into the sender's
        buffer, out of it on the other side), each synchronised, into one new buffer (a
        problem of several GB a tensor holds one extra copy, not two)."""
        import torch

        if isinstance(value, torch.Tensor):
            copy = torch.empty_like(value)
            for _ in range(2):
                copy.copy_(value)
                self.timer.sync()
            return copy
        if isinstance(value, (list, tuple)):
            return type(value)(self.mirror(v) for v in value)
        return value

    def call(self, fn: Callable[..., Any], inputs: list, flushes: int) -> tuple[dict, Any]:
        out, facts = self.timer(fn, self.mirror(inputs), flushes)
        return facts, self.mirror(out)


def calibration_call(*inputs: Any) -> Any:
    """The call both sides make to calibrate the path: a copy of the first tensor input."""
    import torch

    for value in inputs:
        if isinstance(value, torch.Tensor):
            return value.clone()
    return None


def round_trip(worker_call: Call, local_call: Call, draw: Callable[[int], list], *,
               summarize: Summarize, sync: Callable[[], None], echo: Echo | None = None,
               count: int = PINGS, max_seconds: float = 0.5) -> dict[str, float]:
    """What a call through the worker costs the judge's clock beyond the same call made here
    (the channel: frames, the worker's side of the copies, its probes), in ms: the same
    harmless call (calibration_call) made both ways, alternately, before the candidate's code
    is loaded into the worker, so nothing of the candidate's can lengthen it. Between calls the
    judge does what it does between timed calls (a fresh draw, the output's summary), so that
    the worker waits as long and wakes as it will then. At most `count` rounds, and no more
    than six once `max_seconds` have passed: on KernelBench's largest problems (6 GiB a
    tensor) two seconds of rounds made an evaluation a quarter slower (H200,
    bench/judge_clock.py); fewer rounds there widen the tolerance by their standard error."""
    remote: list[float] = []
    local: list[float] = []
    echoes: list[float] = []
    start = time.perf_counter()
    # A first call through each path pays what is paid once (buffers made and mapped, the
    # worker's first device work): made, and not counted.
    first = draw(-1)
    for call in (worker_call, local_call):
        _facts, out = call(first, 0)
        del out
    del first
    sync()
    start = time.perf_counter()
    for i in range(count):
        inputs = draw(i)
        for call, into in ((worker_call, remote), (local_call, local)):
            sync()
            t0 = time.perf_counter()
            facts, out = call(inputs, 0)
            elapsed = (time.perf_counter() - t0) * 1e3
            summarize(out)
            del out
            sample = _number(facts.get("sample_ms"))
            into.append(elapsed - (sample if sample is not None else 0.0))
        del inputs
        if echo is not None:
            echoes.append(echo.ping())
        if i >= 5 and time.perf_counter() - start > max_seconds:
            break
    return {"median_ms": statistics.median(remote) - statistics.median(local),
            "se_ms": math.hypot(se_median(remote), se_median(local)),
            "worker_ms": statistics.median(remote), "local_ms": statistics.median(local),
            "echo_ms": statistics.median(echoes) if echoes else None,
            "echo_se_ms": se_median(echoes) if echoes else 0.0, "n": len(remote)}


def vouch(cand: Side, ref: Side, rtt: dict[str, float], one_flush_ms: float, *,
          on_gpu: bool = True) -> dict[str, Any]:
    """Whether the judge's clock explains the candidate's reported times.

    The reference went through the same timed call and the same copies in the judge, so what
    its intervals hold beyond its calls is the path's cost; the candidate's adds what the path
    through the worker costs beyond it (`round_trip`). Beyond that, plus a tolerance (a floor,
    a share of the call, and the medians' standard errors), the worker reported less than it
    spent. Also: the judge's interval cannot be much shorter than the reported call and the
    flushes it was asked to make."""
    cand_median = statistics.median(cand.samples) if cand.samples else 0.0
    cand_excess, ref_excess = excess(cand, one_flush_ms), excess(ref, one_flush_ms)
    seen = statistics.median(cand_excess) if cand_excess else 0.0
    ref_seen = statistics.median(ref_excess) if ref_excess else 0.0
    # The host's load moved between the calibration and the timing by what the echo's round
    # trip moved (two wakeups, as in a call through the worker).
    drift, drift_se = 0.0, 0.0
    if rtt.get("echo_ms") is not None and cand.echo:
        drift = statistics.median(cand.echo) - float(rtt["echo_ms"])
        drift_se = math.hypot(se_median(cand.echo), float(rtt.get("echo_se_ms") or 0.0))
    # The worker's path cannot cost less than the judge's own: a calibration that says so was
    # disturbed, and counts as no extra cost (never as a credit against the candidate).
    extra = max(0.0, float(rtt.get("median_ms") or 0.0))
    local = float(rtt.get("local_ms") or 0.0)
    if not on_gpu and local > 0 and ref_seen > local:
        # On a CPU runner the worker's path is host work that a host busier than at the
        # calibration slows as much as the judge's own path, which the reference's calls show.
        extra *= min(ref_seen / local, 10.0)
    expected = ref_seen + extra + drift
    # The standard errors of what the judge measured on its own (the reference's path, the
    # calibration, the echo): never the candidate's spread, which a kernel that varies its
    # own calls would widen at will.
    se = math.sqrt(se_median(ref_excess) ** 2 + float(rtt.get("se_ms") or 0.0) ** 2
                   + drift_se ** 2)
    path = max(0.0, float(rtt.get("median_ms") or 0.0))
    rel, path_share = ((REL_TOLERANCE, PATH_TOLERANCE) if on_gpu
                       else (CPU_REL_TOLERANCE, CPU_PATH_TOLERANCE))
    tolerance = ABS_TOLERANCE_MS + STANDARD_ERRORS * se + rel * cand_median + path_share * path
    # Flushes reported but not made (the inputs left hot in the cache) show as an interval
    # short of the flushes' own time.
    skipped = cand.flushes * one_flush_ms
    short = skipped > 0 and seen < expected - 0.5 * skipped - tolerance
    judge_median = statistics.median(cand.judge) if cand.judge else None
    report = {
        "judge_median_ms": judge_median,
        "reported_median_ms": cand_median,
        "unexplained_ms": seen,
        "expected_ms": expected,
        "tolerance_ms": tolerance,
        "reference_unexplained_ms": ref_seen,
        "round_trip_ms": rtt.get("median_ms"),
        "load_drift_ms": drift,
        "flush_ms": one_flush_ms,
        "flushes": cand.flushes,
        # The judge vouches for no less than its interval minus the path's cost.
        "vouched_median_ms": max(cand_median, (judge_median or 0.0) - max(expected, 0.0)),
    }
    report["confirmed"] = math.isfinite(tolerance) and seen <= expected + tolerance and not short
    if short:
        report["reason"] = "the judge's interval is shorter than the reported call and flushes"
    elif not report["confirmed"]:
        report["reason"] = (f"the judge's clock saw {seen - expected:.4f} ms a call more than "
                            f"the worker reported (tolerance {tolerance:.4f} ms)")
    return report
