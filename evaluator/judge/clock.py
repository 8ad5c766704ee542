"""The judge's side of timing: the loop, every call's inputs, and the clock that bounds what the
worker reports (the judge runs this; nothing here runs in the candidate's process).

Everything in the candidate's process (its stack, the worker's objects, its memory) is the
candidate's to read and rewrite, so the timing loop cannot live there:

- Inputs. Every call's inputs are a fresh draw from the problem's own get_inputs() that the
  judge makes under seeds that never leave it, and sends with the call that uses them. No draw
  function, seed or future input exists in the worker, so no answer can be computed ahead.
- The clock. The judge's own clock runs from the moment it starts sending a block of calls'
  inputs to the moment the reply, with every call's whole output, is in. A block holds as many
  calls, each on its own fresh inputs, as make the channel's fixed cost a small share of it
  (`block_size`, from the calibration and the warm-up, capped by memory), so the judge's
  interval per call, less what the path costs (the same `CallTimer` and copies timed here for
  the reference, plus the worker's path measured before the candidate's code was loaded), is a
  measurement of the call itself. That figure ranks (`judge_figure`): the worker's own samples
  (the device events around each call, or its host clock on the CPU) only refine it within the
  judge's resolution, never beyond, so a worker that reports less than it spent gains at most
  that resolution, which the result states. A report outside it is also named (a note).
- Outputs. Each timed call's whole output comes back inside the interval, as plain tensors the
  channel rebuilt from bytes (an output that computes its values when read is read, and so
  computed, inside the interval), and the judge samples and sums it with a seed of its own,
  against the reference on the same draw.

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

from evaluator.timing import (
    MAX_PREFIX_FLUSHES,
    flushes_for,
    is_stable,
    median_rel_err,
)

# A block's (facts, output) per call, for these calls' inputs and that many flushes each.
Call = Callable[[list[list], int], tuple[list[dict], list[Any]]]
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

# Blocks: as many calls per hand-over as make the channel's fixed cost at most this share of
# the block's calls (the target: the judge's clock alone decides a call of 50 us on a
# GPU, 0.5 ms on the CPU, within 5%), at most MAX_BLOCK calls, and at most BLOCK_BYTES of
# inputs and outputs together on the host (a GPU: BLOCK_DEVICE_SHARE of its memory), since a
# block's inputs and outputs are all alive at once. On the CPU a block's inputs, handed over
# before its first call, leave the cache: with 256 MiB and 16 MiB blocks the sample problems'
# honest speedups fell from 0.95-1.0 to 0.55-0.92 and their evaluations took 3-4 times as
# long; at 1 MiB they (1 to 4 MB a call) are timed call by call, as before, and the judge
# states the resolution it has for them.
BLOCK_OVERHEAD_SHARE = 0.05
MAX_BLOCK = 64
BLOCK_BYTES = 1 << 20
BLOCK_DEVICE_SHARE = 1 / 32
# The calibration's second block size (the first is one call): two sizes tell the path's cost
# per hand-over from its cost per call.
CALIBRATION_BLOCK = 32
# The judge's resolution: this many standard errors of what it subtracted (the path's cost,
# measured on its own: never the candidate's spread), plus a floor (ms) for the clock itself.
RESOLUTION_ERRORS = 2.0
RESOLUTION_FLOOR_MS = 0.0005
# and this share of the worker's path per call, which drifts between the calibration and the
# timing beyond its standard error (on a 2-core CPU host, 15 to 60 us of a 60 to 100 us path:
# the channel's per-tensor reads and writes; on a GPU the copies in and out of the boxes, which
# for KernelBench's 6 GiB tensors are milliseconds, so such calls are resolved to about 10%)
RESOLUTION_PATH_SHARE = 0.25
MIN_BLOCKS = 5
# The least share of the judge's own figure it vouches for, whatever its resolution: a call
# ranks at no less, and a report under it is never confirmed.
LEAST_SHARE = 0.5


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
    echo: list[float] = field(default_factory=list)  # the host's round trip beside each block
    blocks: list[float] = field(default_factory=list)  # the judge's interval per timed block
    block: int = 1  # calls per timed block
    flushes: int = 0
    stopped: str = "max_reps"

    def block_means(self) -> list[float]:
        """Per timed block, the mean of its reported calls: the statistic the judge's own clock
        can check (its interval covers a block, not a call), so the one that ranks, for both
        sides. One call a block: the calls themselves."""
        size = max(1, self.block)
        if not self.blocks:
            return list(self.samples)
        means = []
        for b in range(len(self.blocks)):
            reported = self.samples[b * size:(b + 1) * size]
            if reported:
                means.append(statistics.fmean(reported))
        return means

    def stats(self) -> dict[str, Any]:
        return {
            "samples_ms": self.samples, "wall_ms": self.wall, "prefix_ms": self.prefix,
            "judge_ms": self.judge, "warmup_ms": self.warmup, "flushes": self.flushes,
            "launch_ms": statistics.median(self.launch) if self.launch else 0.0,
            "n": len(self.samples), "stopped": self.stopped, "block": self.block,
            "rel_err": median_rel_err(self.samples),
        }


def _number(value: Any) -> float | None:
    """A figure from the worker: a finite, non-negative float, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def block_size(call_ms: float, handover_ms: float, call_bytes: int, *, cap_bytes: int,
               max_block: int = MAX_BLOCK) -> int:
    """Calls per timed block: enough that the channel's cost per hand-over is at most
    BLOCK_OVERHEAD_SHARE of the block's calls, within `max_block` and `cap_bytes` of inputs
    and outputs alive at once."""
    want = math.ceil(max(0.0, handover_ms) / (BLOCK_OVERHEAD_SHARE * max(call_ms, 1e-4)))
    fit = cap_bytes // call_bytes if call_bytes > 0 else max_block
    return max(1, min(max_block, want, fit))


class TimingLoop:
    """Times one side block by block: warm-up calls one at a time, then timed blocks of calls
    until the median is stable or a cap is hit. The judge draws each call's inputs just before
    its block (outside its interval)."""

    def __init__(self, draw: Draw, n_sets: int, summarize: Summarize, *, sync: Callable[[], None],
                 one_flush_ms: float, on_gpu: bool, warmup: int = 3, min_reps: int = 20,
                 max_reps: int = 500, target_rel_err: float = 0.0015, max_seconds: float = 10.0,
                 warmup_ms: float = 0.0, echo: Any = None, handover_ms: float = 0.0,
                 cap_bytes: int = BLOCK_BYTES, max_block: int = MAX_BLOCK, **_ignored: Any):
        self.draw, self.n_sets, self.summarize, self.sync = draw, max(1, n_sets), summarize, sync
        self.one_flush_ms, self.on_gpu = one_flush_ms, on_gpu
        self.warmup, self.min_reps, self.max_reps = int(warmup), int(min_reps), int(max_reps)
        self.target_rel_err, self.max_seconds = target_rel_err, max_seconds
        self.warmup_ms = warmup_ms
        self.echo = echo  # Echo: the host's round trip, sampled after each timed block
        self.handover_ms = handover_ms  # the channel's cost per hand-over (the calibration's)
        self.cap_bytes, self.max_block = cap_bytes, max_block
        self.uses = [0] * self.n_sets
        self.count = 0
        self.call_bytes = 0

    def _next_inputs(self) -> tuple[int, int, list]:
        j = self.count % self.n_sets
        k = self.uses[j]
        self.uses[j] = k + 1
        self.count += 1
        return j, k, self.draw(j, k)

    def _block(self, call: Call, side: Side, flushes: int, size: int) -> tuple[list[dict], float]:
        """One hand-over of `size` calls; their facts and the judge's interval (ms)."""
        drawn = [self._next_inputs() for _ in range(size)]
        uses = [(j, k) for j, k, _inputs in drawn]
        blocks = [inputs for _j, _k, inputs in drawn]
        del drawn
        self.sync()  # drawn before the interval opens
        t0 = time.perf_counter()
        facts, outs = call(blocks, flushes)
        block_ms = (time.perf_counter() - t0) * 1e3
        from evaluator.judge.exploits import nbytes

        # (A call's replies are counted where they come in: timed._candidate_block.)
        self.call_bytes = max(self.call_bytes, nbytes(blocks[0], outs[0]))
        del blocks
        facts = [f if isinstance(f, dict) else {} for f in facts]
        for (j, k), f, out in zip(uses, facts, outs, strict=True):
            infos, sampled = self.summarize(out)
            side.records.append({"c": len(side.records), "j": j, "k": k, "outputs": infos,
                                 **{key: f[key] for key in ("alias_input", "reused_from",
                                                            "candidate_threads", "tasks",
                                                            "exact_types")
                                    if key in f}})
            side.outputs.append(sampled)
        return facts, block_ms

    def run(self, call: Call, side: Side | None = None, *, flushes: int | None = None,
            block: int | None = None) -> Side:
        """Time `call`; `flushes` and `block` fixed (the reference, a re-timing) or chosen from
        the warm-up (the launch time; the call's time and size)."""
        side = side or Side()
        warm_start = time.perf_counter()
        i = 0
        while i < max(0, self.warmup) or (
                (time.perf_counter() - warm_start) * 1e3 < self.warmup_ms and i < self.max_reps):
            facts, judge_ms = self._block(call, side, 0, 1)
            side.warmup.append(judge_ms)
            launch = _number(facts[0].get("launch_ms"))
            side.launch.append(min(launch if launch is not None else judge_ms, judge_ms))
            i += 1
        if flushes is None:
            launch = statistics.median(side.launch) if side.launch else 0.0
            flushes = flushes_for(self.one_flush_ms, launch) if self.on_gpu else 0
        side.flushes = max(0, min(int(flushes), MAX_PREFIX_FLUSHES))
        if block is None:
            # The fastest warm-up call: the first ones pay for what is paid once.
            warm = min(side.warmup) if side.warmup else 0.0
            call_ms = warm - self.handover_ms + side.flushes * self.one_flush_ms
            block = block_size(call_ms, self.handover_ms, self.call_bytes,
                               cap_bytes=self.cap_bytes, max_block=self.max_block)
        side.block = max(1, int(block))
        loop_start = time.perf_counter()
        size = side.block
        # At least MIN_BLOCKS blocks, whatever max_reps says: the judge's own figure is a
        # median over blocks.
        while len(side.samples) < max(1, self.max_reps) or len(side.blocks) < MIN_BLOCKS:
            facts, block_ms = self._block(call, side, side.flushes, size)
            side.blocks.append(block_ms / size)
            for f in facts:
                sample = _number(f.get("sample_ms"))
                side.samples.append(sample if sample is not None else block_ms / size)
                side.prefix.append(_number(f.get("prefix_ms")) or 0.0)
                side.wall.append(_number(f.get("wall_ms")) or block_ms / size)
                side.judge.append(block_ms / size)
            if self.echo is not None:
                side.echo.append(self.echo.ping())
            if len(side.blocks) >= MIN_BLOCKS and is_stable(
                    side.samples, self.min_reps, self.target_rel_err) and is_stable(
                    side.blocks, min(3, self.min_reps), 4 * self.target_rel_err):
                side.stopped = "stable"
                break
            if (time.perf_counter() - loop_start > self.max_seconds
                    and len(side.blocks) >= MIN_BLOCKS):
                side.stopped = "max_seconds"
                break
        return side


def excess(side: Side, one_flush_ms: float) -> list[float]:
    """Per timed block (per call, for a side built call by call), what the judge's interval
    holds per call beyond the reported calls and the flushes it asked for (whose device time
    the judge measured itself)."""
    return [judged - reported - side.flushes * one_flush_ms
            for judged, reported in zip(side.blocks or side.judge, side.block_means(),
                                        strict=False)]


_ECHO = "import os\nwhile os.read(0, 1):\n    os.write(1, b'.')\n"


class Echo:
    """A process of the judge's own (no candidate code, no torch) that answers a byte with a
    byte: its round trip is what waking another process costs on this host right now. Sampled
    at the calibration and beside every timed block, it tells how much of a change in the
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
    (a copy into the sender's buffer and one out of it on the other side, each message's
    copies synchronised once), done here around the same timed call, so the reference pays the
    same path."""

    def __init__(self, timer: Any):
        self.timer = timer

    def mirror(self, values: list[Any]) -> list[Any]:
        """A copy of each of `values`, made as the channel makes a message of them: every tensor
        written twice (into the sender's buffer, out of it on the other side), each pass over
        the whole message synchronised once, as the channel does (protocol.Channel.send and
        recv), into one new buffer a tensor (a problem of several GB a tensor holds one extra
        copy, not two). Synchronised after each tensor's copy instead, the reference's path
        held more device round trips a call than the channel's, which the judge then took off
        the candidate's figure: on an H100 its figure for KernelBench's 12_Matmul (two inputs
        and an output a call) was 0.45 of the worker's, and 0.10 for 88_MinGPTNewGelu; with
        the message's copies synchronised once, 1.05 and 0.64 (bench/judge_clock.py)."""
        import torch

        pairs: list[tuple[Any, Any]] = []

        def copy_of(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                copy = torch.empty_like(value)
                pairs.append((copy, value))
                return copy
            if isinstance(value, (list, tuple)):
                return type(value)(copy_of(v) for v in value)
            return value

        copies = [copy_of(value) for value in values]
        for _ in range(2):
            for copy, value in pairs:
                copy.copy_(value)
            self.timer.sync()
        return copies

    def call(self, fn: Callable[..., Any], blocks: list[list],
             flushes: int) -> tuple[list[dict], list[Any]]:
        """A block of calls, as the worker makes them (Worker.block): every call's inputs
        copied in first (as the channel hands the worker the whole block before its first
        call, so that a call's inputs are as far from the cache on both sides), then the calls
        one after the other, then their outputs copied out."""
        copies = self.mirror(blocks)
        facts, outs = [], []
        for inputs in copies:
            out, f = self.timer(fn, inputs, flushes)
            facts.append(f)
            outs.append(out)
        del copies
        return facts, self.mirror(outs)


def round_trip(worker_call: Call, local_call: Call, draw: Callable[[int], list], *,
               summarize: Summarize, sync: Callable[[], None], echo: Echo | None = None,
               count: int = PINGS, max_seconds: float = 0.5,
               cap_bytes: int = BLOCK_BYTES) -> dict[str, float]:
    """What a block of calls through the worker costs the judge's clock beyond the same calls
    made here (the channel: frames, the worker's side of the copies, its probes), in ms, as a
    cost per hand-over and a cost per call: the same harmless call (calibration_call) made both
    ways, alternately, in blocks of one call and of CALIBRATION_BLOCK calls, before the
    candidate's code is loaded into the worker, so nothing of the candidate's can lengthen it.
    Between blocks the judge does what it does between timed blocks (fresh draws, the outputs'
    summaries), so that the worker waits as long and wakes as it will then. At most `count`
    rounds, and no more than six once `max_seconds` have passed: on KernelBench's largest
    problems (6 GiB a tensor) two seconds of rounds made an evaluation a quarter slower (H200,
    bench/judge_clock.py); fewer rounds there widen the resolution by their standard error.
    Where a block of several calls would not fit `cap_bytes`, only blocks of one are made
    (and timed blocks hold one call: block_size)."""
    first = draw(-1)
    from evaluator.judge.exploits import nbytes

    set_bytes = 2 * nbytes(first)
    # The largest block of calibration calls that fits (at least two calls, else one: the
    # timed blocks then hold one call too, whose path the calibration measured whole).
    fits = cap_bytes // set_bytes if set_bytes > 0 else CALIBRATION_BLOCK
    big = min(CALIBRATION_BLOCK, fits) if fits >= 2 else 1
    sizes = (1, big) if big > 1 else (1,)
    remote: dict[int, list[float]] = {n: [] for n in sizes}
    local: dict[int, list[float]] = {n: [] for n in sizes}
    echoes: list[float] = []
    # A first call through each path pays what is paid once (buffers made and mapped, the
    # worker's first device work): made, and not counted.
    for call in (worker_call, local_call):
        _facts, out = call([first], 0)
        del out
    del first
    sync()
    start = time.perf_counter()
    for i in range(count):
        for n in sizes:
            blocks = [draw(i * CALIBRATION_BLOCK + m) for m in range(n)]
            for call, into in ((worker_call, remote[n]), (local_call, local[n])):
                sync()
                t0 = time.perf_counter()
                facts, outs = call(blocks, 0)
                elapsed = (time.perf_counter() - t0) * 1e3
                for out in outs:
                    summarize(out)
                del outs
                reported = sum(_number(f.get("sample_ms")) or 0.0 for f in facts
                               if isinstance(f, dict))
                into.append(elapsed - reported)
            del blocks
        if echo is not None:
            echoes.append(echo.ping())
        if i >= 5 and time.perf_counter() - start > max_seconds:
            break
    one = statistics.median(remote[1]) - statistics.median(local[1])
    one_se = math.hypot(se_median(remote[1]), se_median(local[1]))
    per_call, per_call_se = 0.0, 0.0
    if big > 1:
        several = statistics.median(remote[big]) - statistics.median(local[big])
        several_se = math.hypot(se_median(remote[big]), se_median(local[big]))
        per_call = max(0.0, (several - one) / (big - 1))
        per_call_se = math.hypot(several_se, one_se) / (big - 1)
    return {"median_ms": one, "se_ms": one_se,
            # What a hand-over costs whatever it holds, and what each call in it adds.
            "handover_ms": max(0.0, one - per_call), "handover_se_ms": one_se,
            "per_call_ms": per_call, "per_call_se_ms": per_call_se, "block": big,
            "worker_ms": statistics.median(remote[1]), "local_ms": statistics.median(local[1]),
            "echo_ms": statistics.median(echoes) if echoes else None,
            "echo_se_ms": se_median(echoes) if echoes else 0.0, "n": len(remote[1])}


def path_cost(cand: Side, rtt: dict[str, float], ref_excess: list[float], *,
              on_gpu: bool) -> dict[str, float]:
    """What the worker's path costs per call of the candidate's blocks beyond the judge's own
    (the reference's, `ref_excess` per block): a hand-over's cost shared by the block's calls
    and a cost per call, both from the calibration (`round_trip`); the host's load drift; and
    the standard error of all the judge subtracts."""
    size = max(1, cand.block)
    ref_seen = statistics.median(ref_excess) if ref_excess else 0.0
    # The host's load moved between the calibration and the timing by what the echo's round
    # trip moved (two wakeups a hand-over, as in a block through the worker).
    drift, drift_se = 0.0, 0.0
    if rtt.get("echo_ms") is not None and cand.echo:
        drift = statistics.median(cand.echo) - float(rtt["echo_ms"])
        drift_se = math.hypot(se_median(cand.echo), float(rtt.get("echo_se_ms") or 0.0))
    # The worker's path cannot cost less than the judge's own: a calibration that says so was
    # disturbed, and counts as no extra cost (never as a credit against the candidate).
    handover = max(0.0, float(rtt.get("handover_ms", rtt.get("median_ms")) or 0.0))
    per_call = max(0.0, float(rtt.get("per_call_ms") or 0.0))
    # The judge's own path for a call made alone at the calibration: a reference path per call
    # (in blocks) above it is a host busier than then. (Its path per call in blocks is too
    # small and noisy a yardstick: compared with it, an idle host's reference path read as up
    # to twice as busy, and the worker's path was subtracted twice.)
    local = float(rtt.get("local_ms") or 0.0)
    if not on_gpu and local > 0 and ref_seen > local:
        # On a CPU runner the worker's path is host work that a host busier than at the
        # calibration slows as much as the judge's own path, which the reference's blocks show
        # (a worker that keeps the host busy while the reference is timed to inflate this is
        # flagged background_thread: timed._name_work_beside_the_reference).
        busy = min(ref_seen / local, 10.0)
        handover, per_call = handover * busy, per_call * busy
    path = handover / size + per_call  # the worker's path per call, beyond the judge's
    se = math.sqrt(se_median(ref_excess) ** 2
                   + (float(rtt.get("handover_se_ms", rtt.get("se_ms")) or 0.0) / size) ** 2
                   + float(rtt.get("per_call_se_ms") or 0.0) ** 2 + (drift_se / size) ** 2)
    return {"handover_ms": handover, "per_call_ms": per_call, "drift_ms": drift,
            "path_ms": path, "se_ms": se}


def vouch(cand: Side, ref: Side, rtt: dict[str, float], one_flush_ms: float, *,
          on_gpu: bool = True) -> dict[str, Any]:
    """The judge's own figure for the candidate's call, and whether it explains the worker's
    reported times.

    The reference went through the same timed calls, blocks and copies in the judge, so what
    its intervals hold per call beyond its calls is the path's cost; the candidate's adds what
    the path through the worker costs beyond it (`round_trip`): a cost per hand-over, shared by
    the block's calls, and a cost per call. The judge's interval per call less that path is its
    own measurement of the call (`judge_ms`), known to within its resolution (standard errors
    of what it subtracted, measured on its own: never the candidate's spread, which a kernel
    that varies its calls would widen at will). What ranks is the worker's figure for a block
    (the median over blocks of their calls' mean: the judge's interval covers a block, so a
    call's own figure could hide in its block's other calls), held within that resolution of
    the judge's figure (`ranked_median_ms`): a worker that reports less than it spent gains at
    most the resolution. Beyond a tolerance (a floor, a share of the call, the standard
    errors, a share of the path), the report is named unconfirmed; so is an
    interval shorter than the reported calls and the flushes the judge asked for, or a report
    under half the judge's own figure."""
    size = max(1, cand.block)
    cand_median = statistics.median(cand.samples) if cand.samples else 0.0
    # What the worker says of a block's calls on average, compared with the judge's interval
    # per call: a per-call median below it would hide in a block's other calls.
    cand_means = cand.block_means()
    cand_block = statistics.median(cand_means) if cand_means else 0.0
    cand_excess, ref_excess = excess(cand, one_flush_ms), excess(ref, one_flush_ms)
    seen = statistics.median(cand_excess) if cand_excess else 0.0
    ref_seen = statistics.median(ref_excess) if ref_excess else 0.0
    cost = path_cost(cand, rtt, ref_excess, on_gpu=on_gpu)
    handover, per_call, drift = cost["handover_ms"], cost["per_call_ms"], cost["drift_ms"]
    path, se = cost["path_ms"], cost["se_ms"]
    expected = ref_seen + path + drift / size
    rel, path_share = ((REL_TOLERANCE, PATH_TOLERANCE) if on_gpu
                       else (CPU_REL_TOLERANCE, CPU_PATH_TOLERANCE))
    tolerance = ABS_TOLERANCE_MS + STANDARD_ERRORS * se + rel * cand_block + path_share * path
    # Flushes reported but not made (the inputs left hot in the cache) show as an interval
    # short of the flushes' own time.
    skipped = cand.flushes * one_flush_ms
    short = skipped > 0 and seen < expected - 0.5 * skipped - tolerance
    judge_median = statistics.median(cand.judge) if cand.judge else None
    # The judge's own figure per call: per block, its interval per call less the path and the
    # flushes; the median over blocks. (The least over blocks came closer to an honest 0.5 ms
    # call's own figure, but less the path's median it read 0 for calls shorter than the
    # path's spread, and a figure of 0 bounds no forged one from below.)
    own = [b - expected - skipped for b in (cand.blocks or cand.judge)]
    judge_ms = max(0.0, statistics.median(own)) if own else 0.0
    resolution = RESOLUTION_ERRORS * se + RESOLUTION_PATH_SHARE * path + RESOLUTION_FLOOR_MS
    lower = max(judge_ms - resolution, LEAST_SHARE * judge_ms, RESOLUTION_FLOOR_MS)
    upper = max(judge_ms + resolution, lower)
    ranked = min(max(cand_block, lower), upper) if cand_block > 0 else max(judge_ms, lower)
    report = {
        "judge_median_ms": judge_median,
        "reported_median_ms": cand_median,
        "reported_block_ms": cand_block,
        "judge_ms": judge_ms,
        "ranked_median_ms": ranked,
        "resolution_ms": resolution,
        "resolved": judge_ms >= 2 * resolution,
        "block": size,
        "unexplained_ms": seen,
        "expected_ms": expected,
        "tolerance_ms": tolerance,
        "reference_unexplained_ms": ref_seen,
        "round_trip_ms": rtt.get("median_ms"),
        "handover_ms": handover,
        "per_call_ms": per_call,
        "load_drift_ms": drift,
        "flush_ms": one_flush_ms,
        "flushes": cand.flushes,
        # The judge vouches for no less than its own figure less its resolution.
        "vouched_median_ms": max(cand_block, lower),
    }
    reason = _unconfirmed_because(report, short=short)
    report["confirmed"] = reason is None
    if reason is not None:
        report["reason"] = reason
    return report


def _unconfirmed_because(report: dict[str, Any], *, short: bool) -> str | None:
    """Why the judge does not confirm the worker's report (vouch), or None."""
    seen, expected = report["unexplained_ms"], report["expected_ms"]
    tolerance, judge_ms = report["tolerance_ms"], report["judge_ms"]
    reported = report["reported_block_ms"]
    if short:
        return "the judge's interval is shorter than the reported call and flushes"
    if not math.isfinite(tolerance) or seen > expected + tolerance:
        return (f"the judge's clock saw {seen - expected:.4f} ms a call more than the worker "
                f"reported (tolerance {tolerance:.4f} ms)")
    # Under half the judge's own figure is never confirmed, however wide a loaded host made
    # the tolerance (samples divided by 1000 passed it beside another suite on 2 cores).
    if 0 < reported < LEAST_SHARE * judge_ms:
        return (f"the worker reported {reported:.4f} ms a call, under half the judge's own "
                f"figure ({judge_ms:.4f} ms)")
    return None
