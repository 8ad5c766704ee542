"""Judge processes started ahead of their job, one evaluation each.

Starting an evaluation's processes costs seconds (two Python interpreters, torch imported twice,
CUDA contexts), while the GPU work of a compiled kernel's evaluation can take less than one. A
runner that serves a queue (KB_HARNESS_PRESTART=1 in its environment, or `enable()`) therefore
keeps one spare judge ready: launched through this module's `main`, it starts the candidate's
worker, imports everything both need (and creates their CUDA contexts on a GPU), says it is
ready, and only then waits for its job. `run_job` takes it for the next job that fits it (same
device, limits, build folder and environment) and launches the next spare at once. Without a
spare, `main` hands over to the judge at once (KB_HARNESS_PRESTART=0 launches the judge module
directly, the slow path kept for comparison).

No state leaks between submissions: a pair serves exactly one evaluation, and then the whole
tree is killed like any other. The next spare starts when a job is handed over, next to the
running evaluation (on a GPU both of its processes create their CUDA context ahead too), and it
disturbs none of that evaluation's timings: it is stopped (SIGSTOP to its process group) while
the running evaluation is being timed, and continued (SIGCONT) once that one's timed calls are
done (its untimed checks after them, the profiled call, take seconds on a GPU).

Runner side (this module): `Launch`, `spawn`, `Pool`. The judge's side, what a spare does in
its own process before its job comes: evaluator/judge/spare.py (the runner names it, never
imports it).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator import backends, launcher
from evaluator.process import LogCapture, die_with_parent_preexec
from evaluator.runner.buildcache import ENTRY_FILES, SLOT_MB, remove_tree

PRESTART_ENV = "KB_HARNESS_PRESTART"
LOG_LIMIT = 16 * 1024  # the judge's own stdout/stderr (the candidate's logs travel elsewhere)


def prestart_mode() -> str:
    """"on": keep a spare pair ready; "off": the judge alone, as before the pool existed (the
    slow path kept for comparison); "launch" (unset): launch through the pool's entry point,
    keep no spare."""
    value = os.environ.get(PRESTART_ENV, "")
    return {"1": "on", "0": "off"}.get(value, "launch")


def spec_of(job: dict) -> dict[str, Any]:
    """What a launched process depends on before its job arrives (a normalized job)."""
    return {
        "device": job["device"],
        "limits": job["limits"],
        "log_limit": job["log_limit"],
        "build_dir": job["build_dir"],
        # The sandbox's environment for this job (scrubbed_env) depends on these.
        "cpu_env": dict(backends.get(job["backend"]).cpu_env) if job["device"] == "cpu" else {},
        "gate_dir": job.get("gate_dir"),
        "profile_process": job.get("profile_process", job["device"] != "cpu"),
    }


def spec_key(spec: dict[str, Any], isolation: str) -> str:
    return json.dumps({**spec, "isolation": isolation}, sort_keys=True, default=str)


def spec_keys(job: dict, isolation: str) -> tuple[str, ...]:
    """The spares that may serve `job` (normalized): one of its own kind, and, for a job without
    a profiling process, one with it too (its profiling process goes at handover:
    PreparedWorkers.discard_unused). So the spare after a 6 GiB-tensor problem's evaluation,
    which has none, and the next small one's, which has one, serve each other."""
    spec = spec_of(job)
    keys = (spec_key(spec, isolation),)
    if not spec["profile_process"]:
        keys += (spec_key({**spec, "profile_process": True}, isolation),)
    return keys


def spare_job(job: dict) -> dict:
    """What the spare started beside `job` (normalized) is prepared for: the runner's next
    evaluation as its fair rule orders the queue now (`spare_backend`, and a profiling process
    where that one's problem leaves room for it: `spare_profile_process`), else the usual one."""
    return {**job, "profile_process": job["spare_profile_process"],
            "backend": job["spare_backend"]}


@dataclass
class Launch:
    """A judge process tree, started and waiting for its job (or running it)."""

    proc: subprocess.Popen
    job_w: int
    ev_r: int
    workdir: Path
    slot: Path  # the worker's only writable host folder (buildcache.py), inside workdir
    jail: dict[str, Any]  # the sandbox the worker gets (jail.py)
    token: str
    isolation: str
    key: str
    out_log: LogCapture
    err_log: LogCapture
    spawned_at: float
    spare: bool
    closed: bool = field(default=False)
    paused: bool = field(default=False)

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGCONT)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ready(self, timeout: float = 0.0) -> bool:
        """Whether the launched judge said it is ready for its job (its first event line, which
        it writes once its worker is up and everything is imported). Nothing is read here."""
        if self.ev_r < 0:
            return False
        readable, _, _ = select.select([self.ev_r], [], [], max(timeout, 0.0))
        return bool(readable)

    def kill_group(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def discard(self) -> None:
        """Kill an unused launch and clean up after it."""
        if self.closed:
            return
        self.closed = True
        self.kill_group()
        for fd in (self.job_w, self.ev_r):
            if fd >= 0:  # -1: handed over to someone who closes it
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.job_w = self.ev_r = -1
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        from evaluator.runner import limits

        limits.release(self.jail)  # its cgroup, and the slot's tmpfs before the folder goes
        remove_tree(self.workdir)


def spawn(job: dict, *, prefix: list[str], isolation: str,
          env_for: Callable[[dict, Path], dict[str, str]], spare: bool,
          entry: str | None = None) -> Launch:
    """Start the judge for `job` (normalized): a fresh working folder, a scrubbed environment,
    its own session, and death with the thread that starts it (PR_SET_PDEATHSIG)."""
    from evaluator.runner import jail, limits

    spec = spec_of(job)
    workdir = Path(tempfile.mkdtemp(prefix="kbeval-"))
    os.chmod(workdir, 0o700)
    slot = workdir / "slot"
    slot.mkdir()
    try:
        decision = jail.for_job(job["device"], slot, int(job["limits"].get("tmpfs_mb") or 2048))
        # The slot on a tmpfs of its own and the sandboxes in a cgroup of their own, where the
        # host allows (undone by Launch.discard). The tmpfs has a little room past SLOT_MB, so
        # that the runner's watch sees a slot grown past it and names it (sandbox.run_job).
        decision = limits.limit_job(decision, job["limits"], name=workdir.name,
                                  slot_mb=SLOT_MB + 16, slot_files=ENTRY_FILES * 5 + 1000)
    except BaseException:
        remove_tree(workdir)
        raise
    job_r, job_w = os.pipe()
    ev_r, ev_w = os.pipe()
    try:
        env = env_for(job, workdir)
        token = os.urandom(12).hex()
        env["KB_EVAL_TOKEN"] = token  # marks every process of this evaluation (sandbox)
        env[launcher.JAIL_ENV] = json.dumps(decision)
        if (entry or ("pool" if prestart_mode() != "off" else "judge")) == "pool":
            cmd = [*prefix, sys.executable, "-m", "evaluator.judge.spare",
                   "--job-fd", str(job_r), "--event-fd", str(ev_w),
                   "--spec", json.dumps({**spec, "spare": spare})]
        else:
            cmd = [*prefix, sys.executable, "-m", "evaluator.judge.judge",
                   "--job-fd", str(job_r), "--event-fd", str(ev_w)]
        proc = launcher.start_trusted(
            cmd,
            cwd=str(workdir),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(job_r, ev_w),
            start_new_session=True,  # its own process group, killed as a whole
            preexec_fn=die_with_parent_preexec(),
        )
    except BaseException:
        for fd in (job_r, job_w, ev_r, ev_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        limits.release(decision)
        remove_tree(workdir)
        raise
    os.close(job_r)
    os.close(ev_w)
    return Launch(
        proc=proc, job_w=job_w, ev_r=ev_r, workdir=workdir, slot=slot, jail=decision,
        token=token, isolation=isolation,
        key=spec_key(spec, isolation), out_log=LogCapture(proc.stdout, LOG_LIMIT),
        err_log=LogCapture(proc.stderr, LOG_LIMIT), spawned_at=time.monotonic(), spare=spare,
    )


class Pool:
    """At most one spare launch, for the next job of the same kind, or of that kind without a
    profiling process (spec_keys)."""

    def __init__(self) -> None:
        self.spare: Launch | None = None
        self.enabled = prestart_mode() == "on"
        self.lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def pause(self) -> None:
        """Stop the spare (SIGSTOP to its process group) while an evaluation is being timed on
        the CPU, so that its start-up work takes no cycles from the cores being timed."""
        with self.lock:
            spare = self.spare
            if spare is None or spare.paused:
                return
            spare.paused = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(spare.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        with self.lock:
            spare = self.spare
        if spare is not None:
            spare.resume()

    def take(self, keys: tuple[str, ...]) -> Launch | None:
        with self.lock:
            spare, self.spare = self.spare, None
        if spare is None:
            return None
        spare.resume()
        if spare.key in keys and spare.alive():
            self.hits += 1
            return spare
        self.misses += 1
        spare.discard()  # another kind of job, or it died while waiting
        return None

    def refill(self, make: Callable[[], Launch]) -> None:
        """Start the next spare (the caller's thread: its death takes the spare along)."""
        if not self.enabled:
            return
        with self.lock:
            if self.spare is not None:
                return
        try:
            launch = make()
        except Exception:
            return  # no spare this time; the next job starts its own
        with self.lock:
            if self.spare is None:
                self.spare = launch
                return
        launch.discard()

    def clear(self) -> None:
        with self.lock:
            spare, self.spare = self.spare, None
        if spare is not None:
            spare.discard()


POOL = Pool()
atexit.register(POOL.clear)


def enable(on: bool = True) -> None:
    """Keep a spare judge ready for the next evaluation (a runner serving a queue calls it)."""
    POOL.enabled = on
    if not on:
        POOL.clear()


# --- the launched process ---------------------------------------------------------------------
