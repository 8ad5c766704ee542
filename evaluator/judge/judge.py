"""The judge: the trusted process of an evaluation, started by `sandbox.run_job`.

It loads the reference, derives every seed from the server's seed, builds inputs, spawns the
candidate worker and sends it copies, computes the expected outputs only after the worker has
returned its own (so they exist nowhere the candidate could have read them first), compares,
times the reference by the same method the worker times the candidate, cross-checks the worker's
timing against its own clock, and decides the verdict. The candidate's code never runs here.

Known exploits are caught here and named (exploits.py): the worker runs with the judge's probes
(probe.py), every timed call's output is checked against the reference, and a static report of
the source (static_report.py) and the speed of light (speed_of_light.py) go with every result.

Protocol with the sandbox: the job arrives as JSON on --job-fd; events and, last, the result are
JSON lines on --event-fd. Stdout/stderr are not used for it.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import json
import os
import select
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from evaluator import EVALUATOR_VERSION, backends
from evaluator.errors import is_oom, short_message, signal_name, unavailable_reason
from evaluator.judge.gate import DeviceGate
from evaluator.process import LogCapture, apply_limits, resolve_limits

REFERENCE_MODULE = "kb_reference"
# Backends whose source builds an extension when it is loaded (torch.utils.cpp_extension).
# What a source that builds an extension names, whatever backend it was submitted as.
EXTENSION_WORDS = ("cpp_extension", "load_inline")
# The worker's main loop serving the probing worker (probe.py), imported under its own name.
WORKER_ENTRY = "from evaluator.worker.probe import main; main()"
_TIMING_FACTS = ("n", "stopped", "rel_err", "input_sets", "flushes")
# Times both sides are timed when the judge's clock does not confirm the worker's report (a
# host busy for a moment, or a report it cannot vouch for).
TIMING_ATTEMPTS = 3


class Verdict(Exception):
    """Ends the evaluation early with a verdict (raised from deep inside the flow)."""

    def __init__(self, verdict: str, error: str, **fields: Any):
        super().__init__(error)
        self.verdict, self.error, self.fields = verdict, error, fields


class Events:
    def __init__(self, fd: int):
        self.fd = fd

    def emit(self, event: dict) -> None:
        data = (json.dumps(event, default=str) + "\n").encode()
        try:
            while data:
                n = os.write(self.fd, data)
                data = data[n:]
        except OSError:
            pass  # the runner went away; nothing to tell it


class WorkerHandle:
    """The candidate worker process and its private channel.

    The worker runs inside the sandbox the runner chose for this evaluation (jail.py): it gets
    the channel's pipes and memfds and nothing else of ours. Without that decision (a judge
    started by hand) no worker is started at all.
    """

    def __init__(self, device: str, limits: dict, log_limit: int, workdir: Path):
        from evaluator import launcher
        from evaluator.protocol import Channel
        from evaluator.runner import jail

        decision = jail.from_env()
        if decision is None:
            raise Verdict("harness_error", "no sandbox was configured for the candidate's "
                          "worker; refusing to run its code")
        self.jailed = launcher.sandboxed(decision)
        self.cgroup: str | None = decision.get("cgroup") or None  # the evaluation's (jail.py)
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
        for again."""
        self.kill()
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.channel.rfd], [], [], left)
            if not ready:
                return
            try:
                if not os.read(self.channel.rfd, 1 << 16):
                    return
            except OSError:
                return

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


def _summary(stats: dict | None) -> dict | None:
    from evaluator.timing import summarize

    return summarize(stats["samples_ms"]) if stats else None


def load_holds_device(job: dict) -> bool:
    """Whether the judge holds the device shared while the candidate loads (its module's code
    and its model's construction may launch device work): yes, unless the load builds an
    extension the build cache does not hold (a cold build keeps the host a minute or more, and
    no other evaluation's timing should wait that long), or the job only compiles."""
    builds = backends.get(job["backend"]).builds_extension or any(
        word in job["candidate_source"] for word in EXTENSION_WORDS)
    return job.get("mode") != "compile" and not (builds and not job.get("build_cached"))


class Judge:
    """One evaluation, judged. `start_worker` starts a worker process and returns its handle,
    called as WorkerHandle is (pool.py passes one that hands over workers started ahead)."""

    def __init__(self, job: dict, events: Events, workdir: Path, *,
                 start_worker: Callable[..., WorkerHandle] = WorkerHandle):
        self.start_worker = start_worker
        self.job = job
        self.events = events
        self.workdir = workdir
        self.device: str = job["device"]
        self.started = time.monotonic()
        limit = float(job["time_limit_s"])
        # Stop a little before the sandbox's hard kill, so the result still carries the logs.
        # The sandbox sets the deadline on the wall clock (shared across processes).
        epoch = job.get("deadline_epoch")
        if isinstance(epoch, (int, float)):
            self.deadline = self.started + (epoch - time.time())
        else:
            self.deadline = self.started + limit - min(10.0, max(1.0, 0.1 * limit))
        self.result: dict[str, Any] = {
            "verdict": None,
            "correct": False,
            "error": "",
            "traceback": "",
            "compile_log": "",
            "trials": [],
            "candidate": None,
            "reference": None,
            "speedup": None,
            "flags": [],
            "environment": {},
            "seeds": {},
            "phases": {},
            "logs": {"stdout": "", "stderr": ""},
            "evaluator_version": EVALUATOR_VERSION,
            "pids": [],
            "compile": {},
            "timing_detail": {},
            # When each phase began (wall clock): set beside other evaluations' timing
            # windows on a shared device (bench/gpu_sharing.py).
            "phase_log": [],
            "static_report": {},
            # Where the device time went, per kernel (GPU only; _profile).
            "profile": {},
            # Evidence behind the flags (and the checks that found nothing), for admins.
            "checks": {},
        }
        self.worker: WorkerHandle | None = None
        self.profiler: Profiler | None = None
        self.round_trip: dict[str, float] = {}
        self.ref_timer: Any = None  # timing.CallTimer, the judge's (made by _calibrate)
        self.echo: Any = None  # judge_clock.Echo
        self.local_path: Any = None
        self.reference: Any = None  # the problem's module, loaded here
        # Set by the phases in order (_load_reference, _load_candidate): the seeds, the
        # reference's init inputs and model, the load request the workers were sent.
        self.seeds: dict[str, Any] = {}
        self.init_inputs: Any = None
        self.ref_model: Any = None
        self.load_request: dict[str, Any] = {}
        self.checks: dict[str, Any] = self.result["checks"]
        self.gate = DeviceGate(job.get("gate_dir"), sync=self._synchronize,
                               deadline=self.deadline)

    def _synchronize(self) -> None:
        if self.device != "cpu":
            import torch

            torch.cuda.synchronize(torch.device(self.device))

    def phase(self, name: str) -> None:
        self.result["phase_log"].append([name, time.time()])
        self.events.emit({"type": "phase", "phase": name})

    def add_phase_time(self, name: str, seconds: float) -> None:
        phases = self.result["phases"]
        phases[name] = phases.get(name, 0.0) + seconds

    def flag(self, name: str, detail: Any = None) -> None:
        """Name an exploit (or a suspicion) on the result; `detail` is its evidence."""
        if name not in self.result["flags"]:
            self.result["flags"].append(name)
        if detail is not None:
            self.checks.setdefault("flag_details", {}).setdefault(name, detail)

    def flag_all(self, names: list[str], details: dict[str, Any]) -> list[str]:
        for name in names:
            self.flag(name, details or None)
        return names

    def reject_if_needed(self, flags: list[str], where: str) -> None:
        from evaluator.judge.exploits import REJECTING, describe_flags

        rejecting = [f for f in flags if f in REJECTING]
        if rejecting:
            raise Verdict("rejected", f"{where}: {describe_flags(rejecting)}")

    # --- the evaluate flow -------------------------------------------------------------------
    def evaluate(self) -> dict:
        job = self.job
        try:
            try:
                self._evaluate()
            except Verdict:
                raise
            except TimeoutError:  # the device's gate, held by another evaluation (gate.py)
                raise Verdict("timeout", "the time limit was reached waiting for the device, "
                                         "which other evaluations held") from None
            except Exception as exc:
                if not is_oom(exc):
                    raise
                # Our own allocations (the inputs, the expected outputs) failed: the device
                # was full, which is the kernel's doing or its neighbours', never a bug of ours.
                raise Verdict("out_of_memory", "the device ran out of memory while the judge "
                              f"made the inputs or the expected outputs: {short_message(exc)}",
                              ) from None
        except Verdict as v:
            self.result["verdict"] = v.verdict
            self.result["error"] = v.error
            for key, value in v.fields.items():
                if key in ("traceback", "compile_log"):
                    self.result[key] = value or self.result[key]
                else:
                    self.result.setdefault("details", {})[key] = value
        finally:
            t_teardown = time.perf_counter()
            self.result["phase_log"].append(["teardown", time.time()])
            if self.profiler is not None:
                # Before the device is let go. Not waited for: its exit (a CUDA context, CUPTI)
                # overlaps the worker's, and the runner ends whatever is left of the
                # evaluation's processes before the next. Where it had loaded the kernel, it
                # was ended inside the hold already.
                self.profiler.handle.kill(wait=False)
            if self.gate.active:
                self.result["phases"]["gate_wait"] = self.gate.waited_s
            self.gate.close()
            if self.echo is not None:
                self.echo.close()
            if self.worker is not None:
                self.worker.close()
                self.result["logs"] = self.worker.logs()
                self.result["pids"] = sorted(self.worker.pids | (
                    self.profiler.handle.pids if self.profiler is not None else set()))
            self.add_phase_time("teardown", time.perf_counter() - t_teardown)
        self.result["mode"] = job.get("mode", "evaluate")
        self.result["correct"] = self.result["verdict"] == "correct"
        self.result["backend"] = job["backend"]
        self.result["precision"] = job["precision"]
        self.result["tolerance"] = {"atol": job["atol"], "rtol": job["rtol"]}
        return self.result

    def _static_report(self) -> None:
        """Every submission gets one, whatever happens next (read with ast, never run)."""
        from evaluator.runner.static_report import analyze

        job = self.job
        try:
            report = analyze(job["candidate_source"], reference_source=job["reference_source"],
                             backend=job["backend"])
        except Exception as exc:  # a report is evidence; its failure never stops an evaluation
            report = {"error": short_message(exc)}
        self.result["static_report"] = report
        changed = report.get("problem_constants_changed")
        if changed:
            self.flag("problem_size_changed", {"constants": changed})

    def _evaluate(self) -> None:
        """The evaluation's phases, in order. Each leaves what the next needs on the judge."""
        self._static_report()
        self._start_workers()
        self._load_reference()
        self._await_worker_and_calibrate()
        self._load_candidate()
        if self.job.get("mode") == "compile":
            # Build (and cache) only: lets a runner compile ahead on CPU cores while the GPU
            # serves another evaluation. Not an evaluation, so not one of its verdicts.
            self.result["verdict"] = "compiled"
            return
        profile_request = self._profile_request()
        early = self._check_correctness(profile_request)
        if not self.job.get("measure", True):
            self._final_state()
            self.result["verdict"] = "correct"
            return
        self._time()
        self._profile_and_final_checks(profile_request, early=early)
        self.result["verdict"] = "correct"

    def _start_workers(self) -> None:
        """The worker first: its interpreter start and torch import overlap ours. And the
        profiling worker, where the profiled call has a process of its own."""
        job = self.job
        self.worker = self.start_worker(self.device, job["limits"], job["log_limit"],
                                        self.workdir / "worker")
        if (job.get("profile_process") and job.get("mode") != "compile"
                and job.get("measure", True)):
            handle = self.start_worker(self.device, job["limits"], job["log_limit"],
                                       self.workdir / "profiler")
            self.profiler = Profiler(handle, warm_posted=bool(
                getattr(handle, "profiler_warm_posted", False)),
                patience_s=job["profiler_patience_s"])
        # Another evaluation's timing on this device stops these processes (gate.py).
        self.gate.candidates([h.proc.pid for h in (self.worker, self.profiler and
                                                   self.profiler.handle) if h is not None],
                             cgroup=self.worker.cgroup)

    def _load_reference(self) -> None:
        """The environment, every seed (derived from the server's), the reference module and
        its init inputs: all the judge's own, before the candidate's code has run anywhere."""
        import torch

        from evaluator import environment
        from evaluator.loading import derive_seed, make_init_inputs, module_from_source, source_hash

        job, device = self.job, self.device
        if device != "cpu" and not torch.cuda.is_available():
            raise Verdict("harness_error", f"device {device} requested but CUDA is not available")
        self.result["environment"] = environment.collect(device)
        self.result["source_hashes"] = {
            "reference": source_hash(job["reference_source"]),
            "candidate": source_hash(job["candidate_source"]),
        }
        seed = job["seed"]
        n_sets = max(1, int(job["timing"].get("sets", 3)))
        self.seeds = {
            "server": seed,
            "init": derive_seed(seed, "init"),
            "trials": [derive_seed(seed, "trial", k) for k in range(1, job["n_trials"] + 1)],
            "timing": [derive_seed(seed, "timing", j) for j in range(n_sets)],
            # Inputs the judge alone uses (output shapes, costs), and the checks' own draws.
            "probe": derive_seed(seed, "probe"),
            "checks": derive_seed(seed, "checks"),
            # The set the profiling process draws for its calls (judge.Profiler).
            "profile": derive_seed(seed, "profile"),
        }
        self.result["seeds"] = self.seeds
        try:
            self.reference = module_from_source(job["reference_source"], REFERENCE_MODULE)
            self.init_inputs = make_init_inputs(self.reference, self.seeds["init"])
        except Exception as exc:
            reason = unavailable_reason(exc)
            if reason:
                raise Verdict("problem_unavailable", reason) from None
            raise Verdict("harness_error", f"the reference failed to load: {short_message(exc)}",
                          traceback=traceback.format_exc(limit=-5)) from None

    def _await_worker_and_calibrate(self) -> None:
        reply, _ = self.worker.request(None, deadline=self.deadline, phase="start")
        self.add_phase_time("worker_start", time.perf_counter() - self.worker.started)
        if isinstance(reply.get("limits"), dict):
            self.result["environment"]["worker_rlimits"] = reply["limits"]
        if self.job.get("measure", True) and self.job.get("mode") != "compile":
            t_cal = time.perf_counter()
            with self.gate.shared():
                self._calibrate(self.reference, self.seeds)
            self.add_phase_time("calibration", time.perf_counter() - t_cal)

    def _load_candidate(self) -> None:
        """The worker compiles and loads the candidate while the judge builds the reference
        model and prepares its checks; then what the load saw is held to what was sent."""
        from evaluator.loading import build_model

        job, seeds = self.job, self.seeds
        self.phase("compiling")
        t0 = time.perf_counter()
        self.load_request = {
            "cmd": "load", "source": job["candidate_source"], "backend": job["backend"],
            "precision": job["precision"], "init_seed": seeds["init"],
            "build_dir": self.worker.build_dir if self.worker.jailed else job["build_dir"]}
        # Loading is a step on the device like a trial (load_holds_device), held shared until
        # the worker has replied, its device synchronised.
        gated_load = load_holds_device(job)
        with self.gate.shared() if gated_load else contextlib.nullcontext():
            self.worker.post(self.load_request, self.init_inputs, phase="compile")
            with contextlib.nullcontext() if gated_load else self.gate.shared():
                try:
                    self.ref_model = build_model(self.reference.Model, self.init_inputs,
                                                 seeds["init"], self.device, job["precision"])
                except Exception as exc:
                    raise Verdict("harness_error", f"the reference model failed to build: "
                                  f"{short_message(exc)}") from None
                if job.get("mode") != "compile":
                    t_prep = time.perf_counter()
                    self._prepare_checks(self.reference, self.ref_model, seeds)
                    self._note_memory("checks prepared")
                    self._release_cached_memory()
                    self.add_phase_time("checks", time.perf_counter() - t_prep)
            reply, _ = self.worker.request(None, deadline=self.deadline, phase="compile")
        self.worker.channel.release()
        self.add_phase_time("compile", float(reply.get("compile_s") or 0.0))
        self.add_phase_time("load", time.perf_counter() - t0)
        self.result["compile_log"] = str(reply.get("compile_log") or "")
        self.result["compile"] = {
            k: reply.get(k)
            for k in ("cache_hit", "compiled", "compile_s", "load_s", "cache_key", "extensions")
        }
        if not reply.get("ok"):
            raise self._failure(reply)
        if job.get("mode") != "compile":
            self._check_what_the_load_saw(reply)

    def _check_what_the_load_saw(self, reply: dict) -> None:
        from evaluator.judge import exploits
        from evaluator.worker.probe import describe

        probe = reply.get("probe") if isinstance(reply.get("probe"), dict) else {}
        # The model must be built from the judge's init inputs (sizes are the reference's).
        if probe.get("init_inputs") != describe(self.init_inputs):
            self.flag("problem_size_changed", {"init_inputs_seen": probe.get("init_inputs"),
                                               "init_inputs_sent": describe(self.init_inputs)})
        self.flag_all(*exploits.state_flags(probe))

    def _check_correctness(self, profile_request: dict | None) -> bool:
        """Correctness, each trial an untimed step. Where its profiler is up, the profiling
        process's calls run beside the trials, and the hold on the device spans them all until
        that process has replied and is gone (nothing of the candidate's is left running while
        anything is timed). Returns whether the profiled call was made here ("early")."""
        from evaluator.judge import exploits

        self.phase("checking")
        pattern = exploits.poison_pattern(self.seeds["checks"])
        left_running = exploits.LeftRunning()
        earlier_expected: list[Any] = []
        early = (self.profiler is not None and profile_request is not None
                 and self.profiler.warm_now(self.deadline))
        with self.gate.shared() if early else contextlib.nullcontext():
            try:
                if early:
                    self.profiler.start_calls(self.load_request, self.init_inputs,
                                              profile_request, self._profiler_draw())
                for k in range(1, self.job["n_trials"] + 1):
                    with contextlib.nullcontext() if early else self.gate.shared():
                        self._trial(k, self.reference, self.ref_model, pattern, left_running,
                                    earlier_expected)
                if early:
                    t0 = time.perf_counter()
                    self.profiler.collect(self.deadline)
                    self.add_phase_time("profile", time.perf_counter() - t0)
            finally:
                if early:  # its device work ends before the device is let go
                    self.profiler.handle.end()
        return bool(early)

    def _time(self) -> None:
        """The same timed call for candidate and reference, on the same draws, on the same
        device, candidate then reference (clock.py)."""
        self.phase("timing")
        t_timing = time.perf_counter()
        rejecting = self._time_candidate_and_reference(self.reference, self.ref_model,
                                                       self.seeds)
        self.add_phase_time("timing", time.perf_counter() - t_timing)
        self.reject_if_needed(rejecting, "timed calls")

    def _profile_and_final_checks(self, profile_request: dict | None, *, early: bool) -> None:
        """Nothing is timed from here on (the runner lets the next evaluation's processes start
        again): the profiled call if it was not made beside the trials, the worker's final
        state, and the speed of light."""
        t_checks = time.perf_counter()
        self.phase("profiling")
        late = self.profiler is not None and profile_request is not None and not early
        if late:
            # Its profiler was still starting when the trials began (seconds of host work):
            # waited for outside the gate, so that no other evaluation's timing waits on it.
            t0 = time.perf_counter()
            self.profiler.collect(self.deadline)
            self.add_phase_time("profiler_ready_wait", time.perf_counter() - t0)
        with self.gate.shared():
            if late:
                t0 = time.perf_counter()
                self.profiler.start_calls(self.load_request, self.init_inputs, profile_request,
                                          self._profiler_draw())
                self.profiler.collect(self.deadline)
                self.add_phase_time("profile", time.perf_counter() - t0)
                # The kernel is loaded there: gone before the device is let go.
                self.profiler.handle.end()
            self._profile(profile_request,
                          beside_trials=early and self.profiler.failure is None)
            self._final_state()
        self._speed_of_light()
        self.add_phase_time("checks", time.perf_counter() - t_checks)

    def _trial(self, k: int, reference: Any, ref_model: Any, pattern: Any,
               left_running: Any, earlier_expected: list) -> None:
        """Correctness trial k: the candidate's call, then the reference's, then the check."""
        import torch

        from evaluator.judge import exploits
        from evaluator.loading import make_inputs

        job, device, precision = self.job, self.device, self.job["precision"]
        n, seeds = job["n_trials"], self.result["seeds"]
        self.events.emit({"type": "trial", "k": k, "n": n})
        t0 = time.perf_counter()
        inputs = make_inputs(reference, seeds["trials"][k - 1], device, precision)
        self.add_phase_time("inputs", time.perf_counter() - t0)
        t0 = time.perf_counter()
        header = {"cmd": "run", "k": k,
                  "poison": {"pattern": pattern, "nbytes": self.checks.get("output_nbytes",
                                                                           [])}}
        reply, outputs = self.worker.request(header, inputs, deadline=self.deadline,
                                             phase=f"trial {k}")
        self._note_memory(f"trial {k}", reply.get("memory_gb"))
        if not reply.get("ok"):
            self.add_phase_time("correctness", time.perf_counter() - t0)
            self.result["trials"].append({"k": k, "passed": False,
                                          "error": reply.get("error", "")})
            raise self._failure(reply)
        worker_flags = [f for f in reply.get("flags", []) if isinstance(f, str)][:10]
        probe = reply.get("probe") if isinstance(reply.get("probe"), dict) else {}
        flags, details = exploits.trial_flags(probe)
        more, more_details = left_running.check(probe, k)
        flags += [f for f in more if f not in flags]
        details.update(more_details)
        # Memory the kernel never wrote shows the judge's pattern. Mostly unwritten: the
        # output is freed memory handed back (an exploit); a few elements: a bug, which
        # the comparison below reports as incorrect.
        stale = exploits.count_poison(outputs, pattern)
        if stale and 2 * stale >= exploits.checked_elements(outputs):
            flags.append("stale_memory_output")
            details["stale_elements"] = stale
        # Expected outputs only now, after the candidate has produced its own.
        with torch.no_grad():
            expected = ref_model(*inputs)
        trial = self._compare(k, expected, outputs)
        if stale:
            trial["unwritten_elements"] = stale
        if trial["passed"] and k == 1 and precision == "fp32":
            evidence = exploits.precision_evidence(ref_model, inputs, expected, outputs)
            self.checks["precision"] = evidence
            if evidence.get("downgrade"):
                flags.append("precision_downgrade")
        if not trial["passed"]:
            flags += self._name_a_wrong_output(reference, ref_model, earlier_expected,
                                               outputs)
            trial["diagnosis"] = self._diagnose(ref_model, inputs, expected, outputs)
        trial["flags"] = worker_flags + [f for f in flags if f not in worker_flags]
        self.result["trials"].append(trial)
        self.events.emit({"type": "trial_result", "k": k, "n": n, "passed": trial["passed"],
                          "max_abs_diff": trial["max_abs_diff"]})
        if exploits.nbytes(earlier_expected, expected) <= exploits.KEEP_EXPECTED_BYTES:
            earlier_expected.append(expected)  # a cache keyed on addresses hits later
        del expected, outputs, inputs
        self._release_cached_memory()
        self.add_phase_time("correctness", time.perf_counter() - t0)
        for f in worker_flags:
            self.flag(f)
        self.flag_all(flags, details)
        self.reject_if_needed(trial["flags"], f"trial {k}")
        if not trial["passed"]:
            raise Verdict("incorrect", f"trial {k}: {trial.get('reason', 'mismatch')}")

    def _note_memory(self, where: str, worker: Any = None) -> None:
        """Device memory at a step, on both sides (GB): what to look at when an evaluation of
        a problem with large tensors ends out_of_memory. The peaks start again after each."""
        if self.device == "cpu":
            return
        import torch

        free, total = torch.cuda.mem_get_info()
        note = {"judge_peak_reserved": round(torch.cuda.max_memory_reserved() / 1e9, 2),
                "free": round(free / 1e9, 2), "total": round(total / 1e9, 2)}
        if isinstance(worker, dict):
            note["worker"] = {k: v for k, v in worker.items()
                              if isinstance(k, str) and isinstance(v, (int, float))}
        self.checks.setdefault("memory_gb", {})[where] = note
        torch.cuda.reset_peak_memory_stats()

    def _release_cached_memory(self) -> None:
        """Hand the blocks torch keeps cached back to the device. The worker is another process
        with its own cache: on a problem of several GB a tensor, the two caches together once
        held all of an H200's memory, and the worker's next allocation failed."""
        if self.device != "cpu":
            import torch

            torch.cuda.empty_cache()

    # --- exploit checks ------------------------------------------------------------------------
    def _prepare_checks(self, reference: Any, ref_model: Any, seeds: dict) -> None:
        """While the worker compiles: the reference on the judge's own probe inputs (never sent
        anywhere) gives the output sizes (for the freed-memory pattern), the way that
        refreshes timing inputs, and the bytes and FLOPs of the problem."""
        from evaluator.judge import exploits
        from evaluator.judge.speed_of_light import problem_cost
        from evaluator.loading import iter_tensors, make_inputs

        job = self.job
        try:
            inputs = make_inputs(reference, seeds["probe"], self.device, job["precision"])
            cost = problem_cost(ref_model, inputs, count_flops=bool(job.get("peak_tflops")))
            self.checks["cost"] = cost
            import torch

            with torch.no_grad():
                out = ref_model(*inputs)
            self.checks["output_nbytes"] = [t.numel() * t.element_size()
                                            for t in iter_tensors(out)]
            del out
            self._cap_replies(inputs)
            self.checks["refresh"] = exploits.refresh_family(inputs)
        except Exception as exc:  # the problem's own quirks; the checks then do less
            self.checks.setdefault("errors", []).append(f"prepare: {short_message(exc)}")
            self.checks.setdefault("refresh", "none")

    def _cap_replies(self, inputs: list) -> None:
        """What the judge accepts in one reply of the worker, from the reference's own sizes:
        an output (a correctness or timed call), the first timed outputs kept (probe.KEEP_BYTES)
        beside one, or a copy of an input (the calibration), with room to spare; a reply that
        declares more is refused before anything is allocated (protocol.Channel)."""
        from evaluator.loading import iter_tensors
        from evaluator.worker.probe import KEEP_BYTES

        out = sum(self.checks.get("output_nbytes") or [])
        largest_input = max((t.numel() * t.element_size() for t in iter_tensors(inputs)),
                            default=0)
        cap = max(2 * out, KEEP_BYTES + out, largest_input) + (16 << 20)
        channel = self.worker.channel if self.worker is not None else None
        if channel is not None and getattr(channel, "max_tensor_bytes", None):
            channel.max_tensor_bytes = min(channel.max_tensor_bytes, cap)
        self.checks["reply_max_bytes"] = cap

    def _name_a_wrong_output(self, reference: Any, ref_model: Any, earlier_expected: list,
                             outputs: Any) -> list[str]:
        """A wrong output that is the right answer to other inputs names an exploit."""
        from evaluator.judge import exploits

        job = self.job
        for expected in reversed(earlier_expected):
            if exploits.matches(expected, outputs, job["atol"], job["rtol"], self.device):
                return ["result_caching"]
        seed = exploits.seed_replay(reference, ref_model, outputs, device=self.device,
                                    precision=job["precision"], atol=job["atol"],
                                    rtol=job["rtol"])
        if seed is not None:
            self.checks["seed_replay"] = seed
            return ["seed_replay"]
        return []

    def _profile_request(self) -> dict | None:
        """The profiled call's request, or None where nothing is profiled (PyTorch on a CPU)."""
        on_gpu = self.device != "cpu"
        if self.job["backend"] == "torch" and not on_gpu:
            return None
        request: dict[str, Any] = {"cmd": "profile"}
        if on_gpu:
            request.update({"reference_source": self.job["reference_source"],
                            "init_seed": self.result["seeds"].get("init"),
                            "precision": self.job["precision"]})
        return request

    def _profiler_draw(self) -> dict:
        """The set the profiling process draws for its calls: the problem's own inputs."""
        return {"seed": self.result["seeds"]["profile"],
                "reference_source": self.job["reference_source"],
                "precision": self.job["precision"]}

    def _profile(self, request: dict | None, *, beside_trials: bool = False) -> None:
        """A separate, untimed call under the profilers: does the claimed backend do the work,
        and where does the time go (the per-kernel table, candidate and reference)? Its reply
        comes from the profiling process where there is one and it loaded the kernel; else the
        timed worker makes the call now, on its first timing set."""
        from evaluator.judge import exploits

        if request is None:
            return
        backend = backends.get(self.job["backend"])
        on_gpu = self.device != "cpu"
        t0 = time.perf_counter()
        reply = None
        if self.profiler is not None:
            replies = self.profiler.replies
            facts: dict[str, Any] = {"warm_s": replies.get("warm", {}).get("warm_s"),
                                     "beside_trials": beside_trials}
            if replies.get("load", {}).get("ok") and replies.get("profile", {}).get("ok"):
                reply = replies["profile"]
                facts["process"] = "profiler"
            else:  # the timed worker makes the call below, whose failure is the kernel's
                failed = replies.get("profile") if replies.get("load", {}).get("ok") else (
                    replies.get("load"))
                facts["error"] = str((failed or {}).get("error") or self.profiler.failure
                                     or "no reply")[:300]
            self.checks["profiler"] = facts
        if reply is None:
            # The timed worker holds no inputs of its own: the judge draws the call's set.
            from evaluator.loading import make_inputs

            inputs = make_inputs(self.reference, self.result["seeds"]["profile"], self.device,
                                 self.job["precision"])
            reply, _ = self.worker.request(request, inputs, deadline=self.deadline,
                                           phase="profiling")
            del inputs
        self.add_phase_time("profile", time.perf_counter() - t0)
        if not reply.get("ok"):
            if reply.get("verdict") != "harness_error":
                # The kernel's own failure in an ordinary call on the problem's inputs: an
                # honest kernel does not fail for being profiled, and one that did would leave
                # its backend unjudged (tests/exploits: fails_when_profiled).
                failure = self._failure(reply)
                raise Verdict(failure.verdict, "the profiled call (one untimed call under the "
                              f"profiler) failed: {failure.error}", **failure.fields)
            error = str(reply.get("error") or "")[:500]
            if backend.claims_kernels:
                # The worker could not make the call ("nothing to profile"): the kernel's own
                # process may have been tampered with (tests/exploits: unjudged_backend), and a
                # claim nobody checked never ranks.
                raise Verdict("harness_error", "the profiled call could not be made, so the "
                              f"claimed backend could not be checked: {error}")
            self.checks["backend"] = {"error": error}
            return
        kernels = (self.result.get("static_report") or {}).get("kernels") or {}
        names = [str(n) for n in (kernels.get("cuda") or []) + (kernels.get("triton") or [])]
        if on_gpu:
            self.result["profile"] = exploits.kernel_profile(reply, names)
        if not backend.claims_kernels:
            return
        report = exploits.backend_share(reply, backend.name, names, on_gpu)
        if not report.get("not_used"):
            report["evidence"] = self._backend_evidence(reply, kernels)
            report["not_used"] = not report["evidence"].get("ok", True)
        self.checks["backend"] = report
        if report.get("not_used"):
            self.flag("backend_not_used", {"share": report.get("share"),
                                           "own_calls": report.get("own_calls"),
                                           "evidence": (report.get("evidence") or {}
                                                        ).get("missing")})
        elif report.get("minor"):  # a note (flags.py), not an exploit
            self.flag(exploits.BACKEND_SHARE_SMALL, {"share": report.get("share"),
                                                     "own_calls": report.get("own_calls")})

    def _backend_evidence(self, reply: dict, kernels: dict) -> dict[str, Any]:
        """What the profiled call reported, held to what the judge sees from outside the
        candidate's process (evidence.py): the timed worker's, which is still running and
        loaded the same build as the profiling worker, if one made the call."""
        from pathlib import Path

        from evaluator.judge import evidence

        backend, on_gpu = backends.get(self.job["backend"]), self.device != "cpu"
        handle = self.worker
        build = handle.host_build_dir or self.job.get("build_dir") or str(
            self.workdir / "worker" / "build")
        if not build:
            return {"ok": True, "skipped": "no build folder the judge can read"}
        reported = [str(n) for n in reply.get("own_names") or [] if isinstance(n, str)][:40]
        if on_gpu:  # the device kernels the profiler matched to the source's names
            own = (self.result.get("profile") or {}).get("candidate", {}).get("kernels") or []
            reported += [str(k["name"]) for k in own if k.get("own")][:40]
        try:
            if backend.evidence == "extension":
                if on_gpu:  # a CUDA kernel's name is in its extension (symbols, fatbin)
                    reported = [n for n in (kernels.get("cuda") or [])
                                if any(n in r for r in reported)] or reported
                return evidence.extension_evidence(
                    reported, worker_pid=handle.proc.pid, build_root=Path(build),
                    sandbox_root=handle.build_dir)
            if backend.evidence == "triton":
                names = [n for n in (kernels.get("triton") or [])
                         if any(n == r or n in r for r in reported)]
                return evidence.triton_evidence(
                    names or reported, source_kernels=list(kernels.get("triton") or []),
                    build_root=Path(build), on_gpu=on_gpu)
        except Exception as exc:  # the evidence could not be read: say so, decide nothing
            return {"ok": True, "error": f"{type(exc).__name__}: {exc}"[:300]}
        return {"ok": True}

    def _final_state(self) -> None:
        from evaluator.judge import exploits

        reply, _ = self.worker.request({"cmd": "state"}, deadline=self.deadline, phase="checks")
        state = reply.get("probe") if isinstance(reply.get("probe"), dict) else {}
        self.checks["final_state"] = {k: state.get(k) for k in ("patched", "modes",
                                                                "python_threads", "tasks")}
        self.flag_all(*exploits.state_flags(state))

    def _speed_of_light(self) -> None:
        from evaluator.judge.speed_of_light import assess

        job = self.job
        cand = self.result.get("candidate") or {}
        env = self.result.get("environment") or {}
        report = assess(
            self.checks.get("cost"), cand.get("median_ms"), precision=job["precision"],
            peak_bandwidth_gbs=job.get("peak_bandwidth_gbs"), peak_tflops=job.get("peak_tflops"),
            l2_bytes=int(env.get("l2_bytes") or 0),
            l2_flushed=self.device == "cpu" or bool(job["timing"].get("flush_l2", True)),
        )
        self.checks["speed_of_light"] = report
        if report.get("faster_than_light"):
            self.flag("faster_than_light", {"candidate_ms": report.get("candidate_ms"),
                                            "memory_bound_ms": report.get("memory_bound_ms")})

    # --- timing --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _timing_threads(self) -> Iterator[None]:
        """On a CPU runner, the judge's own side of every timed or calibrating call (the
        reference, the channel's copies mirrored) on the intra-op threads the worker's calls
        get (timing.py says why). With the default two on a busy 2-core host, each of the
        judge's copies waited on a thread the host had set aside: the calibration's local path
        took 30 ms a call against 0.7 ms on one thread, and honest results were left
        unconfirmed."""
        import torch

        threads = self.job["timing"].get("cpu_threads", 1)
        if self.device != "cpu" or not isinstance(threads, int) or threads <= 0:
            yield
            return
        from evaluator.environment import note

        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        note("timing_threads", threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def _timed_call_header(self) -> dict[str, Any]:
        cfg = self.job["timing"]
        return {"cmd": "call", "flush_l2": bool(cfg.get("flush_l2", True)),
                "cpu_threads": cfg.get("cpu_threads", 1)}

    def _calibrate(self, reference: Any, seeds: dict) -> None:
        """What the path through the worker costs the judge's clock beyond the same call made
        here, measured before the candidate's code is loaded (judge_clock.round_trip), on a set
        of the problem's inputs drawn for it alone."""
        from evaluator.judge.clock import Echo, LocalPath, calibration_call, round_trip
        from evaluator.loading import make_inputs
        from evaluator.timing import CallTimer

        self.ref_timer = CallTimer(self.device,
                                   flush_l2=bool(self.job["timing"].get("flush_l2", True)))
        self.local_path = LocalPath(self.ref_timer)
        from evaluator.worker.probe import summarize_output

        sample_seed = derive_check_seed(seeds["checks"], 4)

        def draw(i: int) -> list:  # sets for the calibration alone, never timed
            return make_inputs(reference, derive_check_seed(seeds["checks"], 100 + i),
                               self.device, self.job["precision"])

        header = self._timed_call_header()

        def worker_call(values: list, flushes: int) -> tuple[dict, Any]:
            reply, out = self.worker.request({**header, "flushes": flushes}, values,
                                             deadline=self.deadline, phase="start")
            if not reply.get("ok"):
                raise Verdict("harness_error", "the worker failed the judge's calibration "
                              f"call: {str(reply.get('error') or '')[:300]}")
            return reply, out

        def local_call(values: list, flushes: int) -> tuple[dict, Any]:
            return self.local_path.call(calibration_call, values, flushes)

        # A first message without tensors: it carries the channel's CUDA IPC probe, whose answer
        # is in before any tensor travels (a message sent while the probe is out goes through
        # host memory: seconds for a problem of several GB a tensor).
        self.worker.request({"cmd": "ping"}, deadline=self.deadline, phase="start")
        self.echo = Echo()
        with self._timing_threads():
            self.round_trip = round_trip(
                worker_call, local_call, draw, summarize=lambda out: summarize_output(
                    out, sample_seed), sync=self.ref_timer.sync, echo=self.echo)
        self.checks["round_trip"] = self.round_trip

    def _time_candidate_and_reference(self, reference: Any, ref_model: Any,
                                      seeds: dict) -> list[str]:
        """Times both sides call by call through the judge's loop (clock.py): every call's
        inputs drawn here and sent with it, the whole output back inside the judge's interval
        and checked against the reference on the same draw; returns the rejecting flags it
        raised."""
        draw, summarize = self._timed_draws(reference, seeds)
        attempts, records, outputs, late_reply, kept = self._timed_attempts(
            ref_model, draw, summarize, n_sets=len(seeds["timing"]))
        self._note_memory("timing", late_reply.get("memory_gb"))
        self._record_timing(attempts, n_sets=len(seeds["timing"]))
        return self._verify_timed_outputs(ref_model, draw, summarize, attempts, records,
                                          outputs, late_reply, kept)

    def _timed_draws(self, reference: Any, seeds: dict) -> tuple[Any, Any]:
        """Every timed call's inputs, (set j, call k) -> tensors, all drawn by the judge: the
        first call of each set from the timing seeds, later ones from a seed the worker never
        holds; and how a timed output is summarised (sampled) for the later check."""
        from evaluator.loading import make_inputs
        from evaluator.worker.probe import draw_inputs, summarize_output

        device, precision = self.device, self.job["precision"]
        n_sets = len(seeds["timing"])
        later = draw_inputs(reference, derive_check_seed(seeds["checks"], 1), device, precision)
        sample_seed = derive_check_seed(seeds["checks"], 2)

        def draw(j: int, k: int) -> list:
            if k == 0 and j < n_sets:
                return make_inputs(reference, seeds["timing"][j], device, precision)
            return later(j, k)

        def summarize(out: Any) -> tuple[list[dict], Any]:
            return summarize_output(out, sample_seed)

        return draw, summarize

    def _timed_attempts(self, ref_model: Any, draw: Any, summarize: Any, *,
                        n_sets: int) -> tuple[list[dict], list[dict], list[Any], dict, Any]:
        """Candidate then reference, with the device to this evaluation alone (gate.py), until
        the judge's clock vouches for the candidate's samples or TIMING_ATTEMPTS are spent.
        Returns the attempts, the candidate's records and outputs, and the worker's reply to
        "late" (what it kept) with its values."""
        from evaluator.judge.clock import TimingLoop, vouch
        from evaluator.timing import flush_ms

        on_gpu = self.device != "cpu"
        ref_timer = self.ref_timer
        one_flush = flush_ms(ref_timer.flush, self.device) if ref_timer.flush is not None else 0.0
        header = self._timed_call_header()

        def cand_call(inputs: list, flushes: int) -> tuple[dict, Any]:
            reply, out = self.worker.request({**header, "flushes": flushes}, inputs,
                                             deadline=self.deadline, phase="timing")
            if not reply.get("ok"):
                raise self._failure(reply)
            return reply, out

        def ref_call(inputs: list, flushes: int) -> tuple[dict, Any]:
            return self.local_path.call(ref_model, inputs, flushes)

        def loop(offset: int) -> TimingLoop:
            return TimingLoop(lambda j, k: draw(j + offset, k), n_sets, summarize,
                              sync=ref_timer.sync, one_flush_ms=one_flush, on_gpu=on_gpu,
                              echo=self.echo, **dict(self.job["timing"]))

        attempts: list[dict] = []
        records: list[dict] = []
        outputs: list[Any] = []
        with self.gate.exclusive(), self._timing_threads():
            self.result["timing_window"] = [time.time(), None]  # shown beside others' steps
            try:
                for attempt in range(TIMING_ATTEMPTS):
                    offset = 2 * attempt * n_sets
                    cand_loop, ref_loop = loop(offset), loop(offset)
                    cand = cand_loop.run(cand_call)
                    ref = ref_loop.run(ref_call)
                    report = vouch(cand, ref, self.round_trip, one_flush, on_gpu=on_gpu)
                    attempts.append({"cand": cand, "ref": ref, "report": report,
                                     "ref_records": ref.records, "ref_outputs": ref.outputs,
                                     "offset": offset})
                    records += cand.records
                    outputs += cand.outputs
                    if report["confirmed"]:
                        break
            finally:
                self.result["timing_window"][1] = time.time()
            reply, kept = self.worker.request({"cmd": "late"}, deadline=self.deadline,
                                              phase="timing")
        return attempts, records, outputs, reply, kept

    def _record_timing(self, attempts: list[dict], *, n_sets: int) -> None:
        """The last attempt's medians, speedup and the clock's report on the result; the
        samples unconfirmed by the judge's clock flagged."""
        last = attempts[-1]
        cand, ref, report = last["cand"], last["ref"], last["report"]
        cand_stats = {**cand.stats(), "input_sets": n_sets}
        ref_stats = {**ref.stats(), "input_sets": n_sets}
        self.result["candidate"] = _summary(cand_stats)
        self.result["reference"] = _summary(ref_stats)
        if self.result["candidate"] and self.result["reference"]:
            c = self.result["candidate"]["median_ms"]
            r = self.result["reference"]["median_ms"]
            self.result["speedup"] = r / c if c > 0 else None
        report["attempts"] = len(attempts)
        if len(attempts) > 1:
            report["first_attempt"] = {k: attempts[0]["report"].get(k) for k in (
                "judge_median_ms", "reported_median_ms", "unexplained_ms", "expected_ms",
                "tolerance_ms")}
        self.result["timing_detail"] = {
            "candidate": {k: cand_stats[k] for k in _TIMING_FACTS},
            "reference": {k: ref_stats[k] for k in _TIMING_FACTS},
            "judge_clock": report,
            "cross_check": self._stream_check(cand_stats, ref_stats),
            # Other evaluations' candidate processes stopped for the window (gate.py).
            "neighbours_stopped": self.gate.frozen[-1] if self.gate.frozen else None,
        }
        if not report["confirmed"]:
            from evaluator.flags import TIMING_UNCONFIRMED

            self.flag(TIMING_UNCONFIRMED, {k: report.get(k) for k in (
                "reason", "judge_median_ms", "reported_median_ms", "vouched_median_ms")})

    def _verify_timed_outputs(self, ref_model: Any, draw: Any, summarize: Any,
                              attempts: list[dict], records: list[dict], outputs: list[Any],
                              reply: dict, kept: Any) -> list[str]:
        """Every timed call's output, against the reference on the same (drawn) inputs; the
        flags raised, and the rejecting ones returned."""
        import torch

        from evaluator.judge import exploits

        expected: dict[tuple[int, int], tuple[list[dict], Any]] = {}
        for a in attempts:
            for rec, sampled in zip(a["ref_records"], a["ref_outputs"], strict=True):
                expected.setdefault((rec["j"] + a["offset"], rec["k"]), (rec["outputs"], sampled))
        for a, start in zip(attempts, _starts(attempts), strict=True):
            for rec in records[start:start + len(a["cand"].records)]:
                rec["j"] += a["offset"]
        for c, rec in enumerate(records):
            rec["c"] = c

        def expected_for(j: int, k: int) -> tuple[list[dict], Any] | None:
            if (j, k) not in expected:
                if j < 0 or k < 0:
                    return None
                with torch.no_grad():
                    out = ref_model(*draw(j, k))
                self.ref_timer.sync()
                expected[(j, k)] = summarize(out)
            return expected[(j, k)]

        late = _late_samples(reply, kept, summarize)
        made = reply.get("made")
        with torch.no_grad(), self.gate.shared():
            flags, details = exploits.verify_timed_calls(
                records, outputs, late, expected_for, claimed_calls=len(records),
                made_calls=made if isinstance(made, int) and not isinstance(made, bool) else -1,
                atol=self.job["atol"], rtol=self.job["rtol"])
            details["refresh"] = str(self.checks.get("refresh") or "none")
            if {f for f in flags if f in exploits.REJECTING} == {"timed_output_incorrect"} and (
                    details.get("wrong_calls")):
                self._recheck_untimed(ref_model, draw, flags, details)
        self.checks["timed_calls"] = details
        self.flag_all(flags, details)
        state = reply.get("probe") if isinstance(reply.get("probe"), dict) else {}
        self.flag_all(*exploits.state_flags(state))
        return [f for f in flags if f in exploits.REJECTING]

    def _recheck_untimed(self, ref_model: Any, draw: Any, flags: list[str],
                         details: dict[str, Any]) -> None:
        """A timed call returned a wrong output: run the candidate again, untimed, on the same
        inputs (drawn anew here, the judge's own copy) before naming it. Wrong there too is an
        honest mistake on those inputs: `incorrect`, naming their seed. Right there is the
        exploit: the kernel behaved differently when timed."""
        import torch

        from evaluator.worker.probe import draw_seed

        j, k = details["wrong_calls"][0]
        seeds = self.result["seeds"]
        seed = seeds["timing"][j] if k == 0 and j < len(seeds["timing"]) else draw_seed(
            derive_check_seed(seeds["checks"], 1), j, k)
        inputs = draw(j, k)
        reply, outputs = self.worker.request({"cmd": "run", "k": 0}, inputs,
                                             deadline=self.deadline, phase="untimed re-check")
        if not reply.get("ok"):
            raise self._failure(reply)
        with torch.no_grad():
            expected = ref_model(*inputs)
        trial = self._compare(len(self.result["trials"]) + 1, expected, outputs)
        trial["inputs"] = {"timing_set": j, "use": k, "seed": seed}
        if trial["passed"]:
            details["untimed_recheck"] = (f"input set {j}, use {k}: right untimed, wrong when "
                                          f"timed")
            return
        trial["diagnosis"] = self._diagnose(ref_model, inputs, expected, outputs)
        self.result["trials"].append(trial)
        details["untimed_recheck"] = f"input set {j}, use {k}: wrong untimed too"
        self.checks["timed_calls"] = details
        self.flag_all([f for f in flags if f != "timed_output_incorrect"], details)
        raise Verdict("incorrect", f"timing inputs (set {j}, use {k}, seed {seed}): "
                                   f"{trial.get('reason', 'mismatch')}")

    def _stream_check(self, cand: dict, ref: dict) -> dict[str, Any]:
        """Work on another stream, from the worker's own figures (evidence: a worker that hides
        it also hides its time from the judge's clock, which judge_clock.vouch holds it to)."""
        check: dict[str, Any] = {}
        if self.device == "cpu" or not cand["samples_ms"]:
            return check
        # The end event does not wait for work on another stream, the device-wide synchronise
        # does, so the host interval grows past the event interval.
        gaps = [w - p - s for w, p, s in zip(cand["wall_ms"], cand["prefix_ms"],
                                             cand["samples_ms"], strict=False)]
        gap = statistics.median(gaps)
        med = statistics.median(cand["samples_ms"])
        check["median_wall_minus_event_ms"] = gap
        if gap > 0.05 + 0.5 * med:
            self.flag("unsynchronized_work", {"median_gap_ms": gap, "median_ms": med})
        # Or it started early and ran during the flush before the start event, which then
        # took longer than the same flush before the reference's calls.
        per_flush = _median_per_flush(cand)
        ref_per_flush = _median_per_flush(ref)
        if per_flush is not None and ref_per_flush is not None:
            check["flush_ms"] = {"candidate": per_flush, "reference": ref_per_flush}
            if per_flush > 1.25 * ref_per_flush + 0.01:
                self.flag("unsynchronized_work", {"flush_ms": per_flush,
                                                  "reference_flush_ms": ref_per_flush})
        return check

    def _compare(self, k: int, expected: Any, outputs: Any) -> dict:
        from evaluator.judge.compare import compare_outputs

        res = compare_outputs(expected, outputs, atol=self.job["atol"], rtol=self.job["rtol"],
                              expected_device=self.device)
        trial = {"k": k, **res}
        return trial

    def _diagnose(self, ref_model: Any, inputs: list, expected: Any, outputs: Any) -> dict:
        """What the author of a failed trial can act on (diagnose.py); the reference is
        recomputed in lower precision for it, so only here. Never changes the verdict."""
        from evaluator.judge import diagnose

        t0 = time.perf_counter()
        try:
            return diagnose.trial_diagnosis(ref_model, inputs, expected, outputs,
                                            atol=self.job["atol"], rtol=self.job["rtol"],
                                            deadline=self.deadline)
        except Exception as exc:  # a diagnosis is a courtesy
            return {"error": f"{type(exc).__name__}: {exc}"[:300]}
        finally:
            self.add_phase_time("diagnosis", time.perf_counter() - t0)

    def _failure(self, reply: dict) -> Verdict:
        verdict = reply.get("verdict")
        if verdict not in (
            "compile_error", "runtime_error", "out_of_memory", "incorrect", "harness_error"
        ):
            verdict = "runtime_error"
        return Verdict(verdict, str(reply.get("error") or "")[:4000],
                       traceback=str(reply.get("traceback") or "")[:16000],
                       compile_log=str(reply.get("compile_log") or "")[:200000] or None)


def derive_check_seed(seed: int, index: int) -> int:
    from evaluator.loading import derive_seed

    return derive_seed(seed, "check", index)


def _starts(attempts: list[dict]) -> list[int]:
    """Where each attempt's candidate records begin in the list of all of them."""
    starts, total = [], 0
    for a in attempts:
        starts.append(total)
        total += len(a["cand"].records)
    return starts


def _late_samples(reply: dict, kept: Any, summarize: Any) -> dict[int, Any]:
    """The kept outputs, sampled now by the judge (untrusted: checked for shape)."""
    calls = reply.get("calls")
    late: dict[int, Any] = {}
    if not isinstance(calls, list) or not isinstance(kept, list):
        return late
    for c, out in zip(calls, kept, strict=False):
        if isinstance(c, int) and not isinstance(c, bool):
            try:
                late[c] = summarize(out)[1]
            except Exception:  # a malformed kept output is evidence of nothing
                continue
    return late


def _median_per_flush(stats: dict) -> float | None:
    flushes = stats.get("flushes")
    if not isinstance(flushes, int) or flushes < 1 or not stats.get("prefix_ms"):
        return None
    return statistics.median(stats["prefix_ms"]) / flushes


def run_mode(job: dict, events: Events, workdir: Path, *,
             start_worker: Callable[..., WorkerHandle] = WorkerHandle) -> dict:
    mode = job.get("mode", "evaluate")
    if mode in ("evaluate", "compile"):
        return Judge(job, events, workdir, start_worker=start_worker).evaluate()
    # Other modes (validate, baseline) live in their own modules with a `run(job, events,
    # workdir) -> dict` entry point, e.g. evaluator/judge/validate.py.
    module_name = {"validate": "validate", "baseline": "validate"}.get(mode, mode)
    try:
        module = importlib.import_module(f".{module_name}", __package__)
    except ImportError:
        return {"verdict": "harness_error", "correct": False, "error": f"unknown mode {mode!r}",
                "evaluator_version": EVALUATOR_VERSION}
    # Validations and baselines time the reference throughout: the device is theirs alone. A
    # baseline job that only compiles ahead (measure=False) times nothing, and several of them
    # compile side by side (gpu_runner.curation.baselines_compile_ahead): shared.
    gate = DeviceGate(job.get("gate_dir"))
    hold = gate.exclusive if job.get("measure", True) else gate.shared
    try:
        with hold():
            return module.run(job, events, workdir)
    finally:
        gate.close()


def main(argv: list[str] | None = None, *,
         start_worker: Callable[..., WorkerHandle] = WorkerHandle) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-fd", type=int, required=True)
    parser.add_argument("--event-fd", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        # Our memory (the expected outputs) is not readable through /proc or ptrace by other
        # processes of the same user that lack CAP_SYS_PTRACE.
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    except (OSError, AttributeError):
        pass
    with os.fdopen(args.job_fd, "rb") as f:
        job = json.loads(f.read())
    limits = job.get("limits") or {}
    apply_limits({"RLIMIT_CORE": None if limits.get("core_dumps") else 0,
                  "RLIMIT_NOFILE": limits.get("open_files")})
    events = Events(args.event_fd)
    events.emit({"type": "started"})
    try:
        result = run_mode(job, events, Path.cwd(), start_worker=start_worker)
    except Exception as exc:
        result = {
            "verdict": "harness_error",
            "correct": False,
            "error": f"harness error: {short_message(exc)}",
            "traceback": "".join(traceback.format_exception(exc))[-8000:],
            "evaluator_version": EVALUATOR_VERSION,
        }
    events.emit({"type": "result", "result": result})
    # Nothing is left to say; skip the interpreter's (and CUDA's) slow teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
