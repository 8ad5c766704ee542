"""The judge's handles on the candidate's processes: the timed worker and the profiling
worker (Profiler), each started through the launcher inside the sandbox, and the Verdict
that a crash, a timeout or a malformed reply becomes.
"""

from __future__ import annotations

import json
import math
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from evaluator.errors import signal_name
from evaluator.process import LogCapture, resolve_limits

# The worker's main loop serving the probing worker (probe.py), imported under its own name.
WORKER_ENTRY = "from evaluator.worker.probe import main; main()"


class Verdict(Exception):
    """Ends the evaluation early with a verdict (raised from deep inside the flow)."""

    def __init__(self, verdict: str, error: str, **fields: Any):
        super().__init__(error)
        self.verdict, self.error, self.fields = verdict, error, fields


def reported_seconds(value: Any, at_most: float) -> float:
    """A duration the worker reported (its replies are the candidate's to forge), as a number
    the judge can hold: 0 for anything but a finite real, else within [0, at_most], what the
    judge itself waited for it. Never raises: a forged 10**400 once ended an evaluation."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    try:
        seconds = float(value)
    except OverflowError:
        return 0.0
    if not math.isfinite(seconds):
        return 0.0
    return min(max(seconds, 0.0), max(at_most, 0.0))


class WorkerHandle:
    """The candidate worker process and its private channel.

    The worker runs inside the sandbox the runner chose for this evaluation (jail.py): it gets
    the channel's pipes and memfds and nothing else of ours. Without that decision (a judge
    started by hand) no worker is started at all.
    """

    def __init__(self, device: str, limits: dict, log_limit: int, workdir: Path):
        from evaluator import launcher
        from evaluator.protocol import Channel

        decision = launcher.jail_from_env()
        if decision is None:
            raise Verdict("harness_error", "no sandbox was configured for the candidate's "
                          "worker; refusing to run its code")
        self.jailed = launcher.sandboxed(decision)
        self.cgroup: str | None = decision.get("cgroup") or None  # the evaluation's (limits.py)
        # Where the worker finds its build folder: the slot, as mounted inside the sandbox.
        self.build_dir: str | None = launcher.BUILD if self.jailed else None
        # And where the judge finds it on the host (evidence.py reads what was built there).
        self.host_build_dir: str | None = (str(decision.get("slot") or "") or None
                                           ) if self.jailed else None
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        mem_judge = os.memfd_create("kb-judge-to-worker")  # written by the judge only
        mem_worker = os.memfd_create("kb-worker-to-judge")  # written by the worker only
        child_fds = (to_worker_r, from_worker_w, mem_worker, mem_judge)
        workdir.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-c", WORKER_ENTRY,
                "--fds", ",".join(str(f) for f in child_fds), "--device", device,
                "--limits", json.dumps(resolve_limits(limits, device != "cpu"))]
        self.started = time.perf_counter()
        self.proc = launcher.start_sandboxed(decision, argv, env=dict(os.environ),
                                             cwd=str(workdir), pass_fds=child_fds)
        os.close(to_worker_r)
        os.close(from_worker_w)
        self.stdout = LogCapture(self.proc.stdout, log_limit)
        self.stderr = LogCapture(self.proc.stderr, log_limit)
        self.channel = Channel(from_worker_r, to_worker_w, mem_judge, mem_worker, device=device)
        self.pids: set[int] = set()

    def post(self, header: dict, value: Any = None, *, phase: str) -> None:
        """Send a request without waiting for its reply (collected later with request(None))."""
        try:
            self.channel.send(header, value)
        except OSError as exc:
            raise self.crash_verdict(phase, exc) from None

    def request(self, header: dict | None, value: Any = None, *, deadline: float, phase: str):
        """Send a request and wait for the reply; crashes and timeouts become Verdicts."""
        from evaluator.protocol import ProtocolError

        try:
            if header is not None:
                self.channel.send(header, value)
            self._wait_readable(deadline)
            reply, out = self.channel.recv(timeout=max(deadline - time.monotonic(), 0.001))
        except TimeoutError:
            self.kill()
            raise Verdict("timeout", f"time limit reached during {phase}") from None
        except (ProtocolError, OSError) as exc:
            raise self.crash_verdict(phase, exc) from None
        finally:
            if header is not None and value is not None:
                self.channel.release()
        if "pid" in reply and isinstance(reply["pid"], int):
            self.pids.add(reply["pid"])
        return reply, out

    def _wait_readable(self, deadline: float) -> None:
        """Until the worker's reply starts, or its process is gone: a sandbox that failed to
        start (bwrap exits, its reply never comes) ends the evaluation at once, not at its
        time limit. Only whole frames are read after this, so nothing is read twice."""
        while True:
            if self.channel.holding:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply in time")
            ready, _, _ = select.select([self.channel.rfd], [], [], min(left, 0.5))
            if ready:
                return
            if self.proc.poll() is not None:
                raise OSError(f"the worker's process exited ({self.proc.returncode}) without "
                              f"replying: {self.stderr.text(wait=0.2)[-300:]}")

    def crash_verdict(self, phase: str, exc: BaseException) -> Verdict:
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        if rc is None:
            self.kill()
            if "out of memory" in str(exc).lower():
                # Its reply could not be copied for want of device memory: the device's state
                # (beside other evaluations, a run alone follows), not a malformed reply.
                return Verdict("out_of_memory", f"the device ran out of memory while the worker's "
                               f"reply was copied during {phase}: {exc}")
            return Verdict("runtime_error",
                           f"the worker sent a malformed reply during {phase}: {exc}")
        sig = signal_name(rc)
        if sig:
            hint = " (killed: out of memory or an external limit)" if sig == "SIGKILL" else ""
            return Verdict("runtime_error", f"crashed: {sig} during {phase}{hint}", signal=sig)
        return Verdict("runtime_error",
                       f"the candidate process exited with status {rc} during {phase}")

    def kill(self, *, wait: bool = True) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except OSError:
                pass
            if not wait:
                return
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def end(self, timeout: float = 5.0) -> None:
        """Killed, and waited for until nothing holds its end of the channel any more: the
        sandbox's processes die a moment after bwrap's own exit (with their pid namespace), so
        the process alone is not the barrier. What is left unread is dropped: it is not asked
        for again.

        Once every process of its sandbox is gone (the one that started its pid namespace
        among them: the kernel lets that one end only after all others in the namespace have),
        the device memory it mapped from the judge is given back (Channel.free_boxes); else it
        is kept until the judge exits. A process of the candidate's that mapped a box without
        holding the pipe is in that namespace too."""
        from evaluator.process import process_tree, stat_fields

        below = process_tree(self.proc.pid) if self.proc.poll() is None else []
        self.kill()
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.channel.rfd], [], [], left)
            if not ready:
                return
            try:
                if not os.read(self.channel.rfd, 1 << 16):
                    break
            except OSError:
                return
        else:
            return

        def alive(pid: int) -> bool:
            fields = stat_fields(pid)
            return bool(fields) and fields[0] not in "ZX"

        while any(alive(pid) for pid in below):
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)
        if below and self.channel.in_box is not None:
            self.channel.free_boxes()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.channel.send({"cmd": "exit"})
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def logs(self) -> dict[str, str]:
        return {"stdout": self.stdout.text(), "stderr": self.stderr.text()}


class Profiler:
    """A second sandboxed worker of the candidate's, for the profiled call on a GPU.

    The first device-profiler session of a process takes seconds (CUPTI), and a process that
    has run one launches small kernels slower, so the timed worker never profiles. This one is
    started with the evaluation (ahead of it with a spare judge, pool.py) and starts its
    profiler at once. Once the timed worker has built the candidate, this one loads it from the
    build folder and makes the profiled calls, candidate then reference, on a set it draws from
    the problem's get_inputs(): beside the correctness trials when its profiler is up by then,
    else after the timing. Its replies are collected in order when needed. What it reports is
    evidence, like the timed worker's, never a timing."""

    def __init__(self, handle: WorkerHandle, *, warm_posted: bool, patience_s: float):
        self.handle = handle
        self.patience_s = patience_s  # at most this long a wait for it, each time (config.py)
        handle.channel.note_as = "transfer_profiler"  # the timed worker's figures stay whole
        self.pending: list[str] = ["ready"] + (["warm"] if warm_posted else [])
        self.replies: dict[str, dict] = {}
        # Why this process stopped serving (crashed, ran out of time, could not start): then
        # the timed worker makes the profiled call after the timing, and that call's outcome
        # is the kernel's. A process of its own dying is never a verdict by itself: on a
        # shared device it can be memory that others hold, and a kernel that ends it on
        # purpose is still profiled (tests/exploits: crashes_profiling_process).
        self.failure: str | None = None
        if not warm_posted:
            self.post({"cmd": "profiler_warm"}, what="warm")

    def _failed(self, verdict: Verdict) -> None:
        self.failure = f"{verdict.verdict}: {verdict.error}"
        self.pending.clear()
        self.handle.end()

    def post(self, header: dict, value: Any = None, *, what: str) -> None:
        if self.failure is not None:
            return
        try:
            self.handle.post(header, value, phase="profiling")
        except Verdict as verdict:
            self._failed(verdict)
            return
        self.pending.append(what)

    def warm_now(self, deadline: float) -> bool:
        """Whether its start and its profiler's warm-up have both replied, without waiting."""
        from evaluator.protocol import ProtocolError

        try:
            while self.pending and self.pending[0] in ("ready", "warm"):
                try:
                    arrived = self.handle.channel.ready(
                        timeout=max(deadline - time.monotonic(), 0.001))
                except (ProtocolError, OSError, TimeoutError) as exc:
                    raise self.handle.crash_verdict("profiling", exc) from None
                if not arrived:
                    return False
                what = self.pending.pop(0)
                self.replies[what], _ = self.handle.request(None, deadline=deadline,
                                                            phase="profiling")
        except Verdict as verdict:
            self._failed(verdict)
        return self.failure is None

    def start_calls(self, load: dict, init_inputs: Any, request: dict, draw: dict) -> None:
        """Load the built candidate, then the profiled calls on a set drawn there (`draw`: the
        seed, the reference and the precision for its get_inputs()): neither carries tensors of
        ours, so both go at once and run while the judge does other work. Its first call
        (Triton's compile or autotuning, lazy set-up) stays out of the profile."""
        self.post(load, init_inputs, what="load")
        self.post({**request, "warmup": True, "draw": draw}, what="profile")

    def collect(self, deadline: float) -> dict[str, dict]:
        """Its replies so far, waited for until `deadline` or `patience_s` from now."""
        patience_ends = time.monotonic() + self.patience_s
        while self.pending:
            what = self.pending.pop(0)
            try:
                reply, _ = self.handle.request(None, deadline=min(deadline, patience_ends),
                                               phase="profiling")
            except Verdict as verdict:
                if verdict.verdict == "timeout" and patience_ends >= deadline:
                    self._failed(verdict)
                    raise  # the evaluation's own time limit, not the patience, ran out
                if verdict.verdict == "timeout":
                    verdict = Verdict("timeout", f"no reply within {self.patience_s:g} s")
                self._failed(verdict)
                break
            self.replies[what] = reply
            if what == "load":
                self.handle.channel.release()
        return self.replies
