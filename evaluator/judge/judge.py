"""The judge: the trusted process of an evaluation, started by `sandbox.run_job`.

It loads the reference, derives every seed from the server's seed, builds inputs, spawns the
candidate worker and sends it copies, computes the expected outputs only after the worker has
returned its own (so they exist nowhere the candidate could have read them first), compares,
times the reference by the same method the worker times the candidate, cross-checks the worker's
timing against its own clock, and decides the verdict. The candidate's code never runs here.

Known exploits are caught here and named (exploits.py): the worker runs with the judge's probes
(probe.py), every timed call's output is checked against the reference, and a static report of
the source (static_report.py) and the speed of light (speed_of_light.py) go with every result.

The evaluation is a sequence of phase methods (`Judge._evaluate`): here the workers' start, the
reference, the candidate's load; in trials.py the correctness trials; in timed.py the timed
calls through the judge's clock; in profiled.py the profiled call, the backend's evidence and
the final state. workers.py holds the handles on the candidate's processes.

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
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluator import EVALUATOR_VERSION, backends
from evaluator.config import starts_profiling_process
from evaluator.errors import is_oom, short_message, unavailable_reason
from evaluator.gate import DeviceGate
from evaluator.judge.evidence import process_tree, processes_left_running
from evaluator.judge.profiled import ProfiledPhases
from evaluator.judge.timed import TimedPhases
from evaluator.judge.trials import CorrectnessPhases
from evaluator.judge.workers import Profiler, Verdict, WorkerHandle, reported_seconds
from evaluator.process import apply_limits
from evaluator.types import blank_result

REFERENCE_MODULE = "kb_reference"


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


def load_holds_device(job: dict) -> bool:
    """Whether the judge holds the device shared while the candidate loads (its module's code
    and its model's construction may launch device work): yes, unless the load builds an
    extension the build cache does not hold (a cold build keeps the host a minute or more, and
    no other evaluation's timing should wait that long), or the job only compiles."""
    builds = backends.builds_extension(job["backend"], job["candidate_source"])
    return job.get("mode") != "compile" and not (builds and not job.get("build_cached"))


class Judge(CorrectnessPhases, TimedPhases, ProfiledPhases):
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
            **blank_result(verdict=None, seeds={}, evaluator_version=EVALUATOR_VERSION),
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
        self.processes_before_load: set[int] | None = None  # the worker's, by _load_candidate
        self.worker_beside_reference: dict[str, float] | None = None  # by the timing (timed.py)
        self.round_trip: dict[str, float] = {}
        self.ref_timer: Any = None  # timing.CallTimer, the judge's (made by _calibrate)
        self.echo: Any = None  # clock.Echo
        self.local_path: Any = None
        self.reference: Any = None  # the problem's module, loaded here
        # Set by the phases in order (_load_reference, _load_candidate): the seeds, the
        # reference's init inputs and model, the load request the workers were sent.
        self.seeds: dict[str, Any] = {}
        # The trials' expected outputs, summarised as timed outputs are (timed.py): a cache
        # keyed on an address a trial used answers a timed call with one of them.
        self.trial_answers: list[tuple[list[dict], Any]] = []
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
        from evaluator.static_report import analyze

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
        if starts_profiling_process(job):
            handle = self.start_worker(self.device, job["limits"], job["log_limit"],
                                       self.workdir / "profiler")
            self.profiler = Profiler(handle, warm_posted=bool(
                getattr(handle, "profiler_warm_posted", False)),
                patience_s=job["profiler_patience_s"])
        # A spare's profiling process that this job has none of goes now (pool.py).
        getattr(self.start_worker, "discard_unused", lambda: None)()
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
            # The set the profiling process draws for its calls (workers.Profiler).
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
        # The worker's processes before the kernel's code runs (_name_processes_left_running).
        self.processes_before_load = set(process_tree(self.worker.proc.pid))
        with self.gate.shared() if gated_load else contextlib.nullcontext():
            self.worker.post(self.load_request, self.init_inputs, phase="compile")
            with contextlib.nullcontext() if gated_load else self.gate.shared():
                if job.get("mode") != "compile":  # a build only: no copy of its weights
                    try:
                        self.ref_model = build_model(self.reference.Model, self.init_inputs,
                                                     seeds["init"], self.device,
                                                     job["precision"])
                    except Exception as exc:
                        raise Verdict("harness_error", f"the reference model failed to build: "
                                      f"{short_message(exc)}") from None
                    t_prep = time.perf_counter()
                    self._prepare_checks(self.reference, self.ref_model, seeds)
                    self._note_memory("checks prepared")
                    self._release_cached_memory()
                    self.add_phase_time("checks", time.perf_counter() - t_prep)
            reply, _ = self.worker.request(None, deadline=self.deadline, phase="compile")
        self.worker.channel.release()
        load_s = time.perf_counter() - t0
        # What the worker says it spent compiling and loading, held within what the judge waited.
        spent = {k: reported_seconds(reply.get(k), load_s) for k in ("compile_s", "load_s")}
        self.add_phase_time("compile", spent["compile_s"])
        self.add_phase_time("load", load_s)
        self.result["compile_log"] = str(reply.get("compile_log") or "")
        self.result["compile"] = {
            k: reply.get(k) for k in ("cache_hit", "compiled", "cache_key", "extensions")
        } | spent
        if not reply.get("ok"):
            raise self._failure(reply)
        if job.get("mode") != "compile":
            self._check_what_the_load_saw(reply)

    def _check_what_the_load_saw(self, reply: dict) -> None:
        from evaluator.judge import exploits
        from evaluator.samples import describe

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
                self.trial_answers = [self._timed_summary(e) for e in earlier_expected]
                self._name_processes_left_running()
                if early:
                    t0 = time.perf_counter()
                    self.profiler.collect(self.deadline)
                    self.add_phase_time("profile", time.perf_counter() - t0)
            finally:
                if early:  # its device work ends before the device is let go
                    self.profiler.handle.end()
        return bool(early)

    def _name_processes_left_running(self) -> None:
        """A process the kernel started (at import or in a call) and left running, looked for
        once the trials end and again once the timing ends: work beside the calls, on a
        shared GPU beside other evaluations' timing. The worker counts each trial's new
        children too (exploits.LeftRunning); one started at import or in a timed call is
        found only here, from the judge's side."""
        if self.worker is None or self.processes_before_load is None:
            return
        left = processes_left_running(self.worker.proc.pid, self.processes_before_load)
        if left:
            self.flag("background_process", {"left_running": left[:10]})

    def _time(self) -> None:
        """The same timed call for candidate and reference, on the same draws, on the same
        device, candidate then reference (clock.py)."""
        self.phase("timing")
        t_timing = time.perf_counter()
        rejecting = self._time_candidate_and_reference(self.reference, self.ref_model,
                                                       self.seeds)
        self._name_processes_left_running()
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
