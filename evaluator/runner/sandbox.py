"""Runner side of the evaluator: `run_job` starts an evaluation's process tree and waits.

The runner process (which may hold database credentials and secrets) never imports the
candidate's code or torch here. It starts the judge (trusted) with a scrubbed environment, in a
fresh temporary working folder, in a new session whose whole process group is killed at the
wall-clock limit, and, where the host allows `unshare`, in its own network and pid namespace.
The judge starts the candidate's worker inside the bubblewrap sandbox this module decides for
the evaluation (jail.py: its own uid, no capabilities, seccomp, its own mount, pid, network and
IPC namespaces, read-only interpreter, a private tmpfs) with one writable host folder, the
build slot, which `run_job` fills from and returns to the owner's build cache (buildcache.py).
The judge dies with the runner thread that launched it (PR_SET_PDEATHSIG), and the sandbox
with the judge, so a runner killed outright leaves no evaluation running. Judges may be started
ahead of their job, one per evaluation (pool.py). docs/security.md has the threat model.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator import EVALUATOR_VERSION, backends, gate, launcher
from evaluator.config import JobError, normalize_job, starts_profiling_process
from evaluator.errors import signal_name, truncate
from evaluator.process import kill_tagged, oom_kill_count, parent_death_signal_available
from evaluator.runner import buildcache, jail, limits, pool
from evaluator.runner.results import cap_result, json_safe, with_build_ahead
from evaluator.types import Job, Result, blank_result

# The folder that holds the `evaluation` package: the only entry the children need on PYTHONPATH.
_IMPORT_ROOT = str(Path(__file__).resolve().parents[2])

# Variables that may pass into the sandbox; everything else (DJANGO_SETTINGS_MODULE,
# DATABASE_URL, REDIS_URL, SECRET_KEY, tokens, ...) is dropped.
ENV_ALLOWLIST = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE",
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH",
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
    "CC", "CXX", "CUDAHOSTCXX", "LIBRARY_PATH", "MAX_JOBS", "OMP_NUM_THREADS",
    "HF_HOME",  # level 4: the models' configs, read offline (docs/deploy.md)
)

_UNSHARE_VARIANTS = (
    # Strongest first: no network, and a pid namespace whose init is the judge: when it dies the
    # kernel kills every process in it, even ones that left the process group. Its own /proc
    # too: bwrap, started by the judge, reads /proc/PID of its child by the pid it sees, which
    # in the host's /proc named another process (a second sandbox once failed to start with
    # "open /proc/9/ns/ns failed").
    ("network+pid", ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]),
    ("network", ["unshare", "--net"]),
)
_isolation_cache: tuple[str, list[str]] | None = None
_isolation_lock = threading.Lock()


def isolation_prefix(device: str = "cpu") -> tuple[str, list[str]]:
    """The strongest `unshare` variant that works here (probed once), or ('none', []).

    On a GPU the pid namespace is left out: CUDA does not initialise inside one (seen on the
    H200 host: torch.cuda.is_available() is False under `unshare --pid`), so there the process
    group kill and the parent-death signal keep the tree from outliving its evaluation.
    """
    if device.startswith("cuda"):
        name, prefix = isolation_prefix("cpu")
        if "pid" not in name:
            return name, prefix
        return ("network", ["unshare", "--net"]) if name != "none" else ("none", [])
    global _isolation_cache
    with _isolation_lock:
        if _isolation_cache is None:
            _isolation_cache = ("none", [])
            if shutil.which("unshare") and os.environ.get("KB_HARNESS_NO_UNSHARE") != "1":
                for name, prefix in _UNSHARE_VARIANTS:
                    try:
                        ok = launcher.run_trusted([*prefix, "true"], timeout=10).returncode == 0
                    except (OSError, subprocess.TimeoutExpired):
                        ok = False
                    if ok:
                        _isolation_cache = (name, prefix)
                        break
        return _isolation_cache


def scrubbed_env(job: dict, workdir: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    tmp = workdir / "tmp"
    tmp.mkdir(exist_ok=True)
    build_root = Path(job["build_dir"]) if job.get("build_dir") else workdir / "build"
    env.update({
        "HOME": str(workdir),
        "TMPDIR": str(tmp),
        "PYTHONPATH": _IMPORT_ROOT,
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",  # prints reach the log even if the candidate is killed
        "TORCH_EXTENSIONS_DIR": str(build_root / "ext"),
        "TRITON_CACHE_DIR": str(build_root / "triton"),
        # The other languages' compiler caches (TileLang's, CuTe DSL's, cuTile's), in the slot
        # too: the owner's, and where the judge reads their evidence.
        **{var: str(build_root / folder) for var, folder in backends.CACHE_ENV.items()},
        **backends.WORKER_ENV,
        # The same host allocator behaviour in the judge and the worker. glibc's default
        # threshold for serving an allocation with a fresh mmap moves with each process's
        # history, so one side could pay page faults on every output it allocates and the
        # other none (a 1 MiB CPU add measured 0.46 ms instead of 0.035 ms in the judge):
        # fixed, allocations up to 32 MiB (glibc's maximum) reuse freed memory on both sides.
        # torch.compile compiles in the worker's own process: its default pool of compile
        # workers would stay alive beside the calls, and the judge names every process a
        # kernel leaves running (Judge._name_processes_left_running) by no name a process
        # could give itself.
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
        # Nothing is downloaded during an evaluation: the hub's libraries read HF_HOME only.
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
        "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
        **({"KB_HARNESS_CUDA_IPC": os.environ["KB_HARNESS_CUDA_IPC"]}
           if "KB_HARNESS_CUDA_IPC" in os.environ else {}),
    })
    if job["device"] == "cpu":
        env.update(backends.get(job["backend"]).cpu_env)
    return env


def _base_result(job: dict | None) -> dict[str, Any]:
    return blank_result(verdict="harness_error",
                        seeds={"server": job.get("seed")} if job else {},
                        evaluator_version=EVALUATOR_VERSION)


# How util-linux `unshare --fork` reports a child killed by SIGKILL: it cannot re-raise that
# signal on itself, so it exits with status 1 and this message instead.
_UNSHARE_SIGKILL = "sigprocmask unblock failed"


def _judge_died(job: dict, rc: int | None, stderr: str, oom_before: int | None) -> dict:
    """The result when the judge ended without one: a crash, or a kill from outside."""
    result = _base_result(job)
    sig = signal_name(rc) if rc is not None else None
    if sig is None and rc == 1 and _UNSHARE_SIGKILL in stderr:
        sig = "SIGKILL"
    if sig == "SIGKILL":
        # Nobody in the sandbox kills the judge (the time limit is handled above): the kernel's
        # out-of-memory killer is what does, when the host runs out of memory.
        oom_after = oom_kill_count()
        counted = oom_before is not None and oom_after is not None
        if not counted or oom_after > oom_before:
            result["verdict"] = "out_of_memory"
            how = ("the kernel's out-of-memory killer ended the judge process (SIGKILL)"
                   if counted else "the judge process was killed (SIGKILL), most likely by the "
                   "kernel's out-of-memory killer")
            result["error"] = f"the evaluation ran out of host memory: {how}"
        else:
            result["verdict"] = "runtime_error"
            result["error"] = ("the judge process was killed (SIGKILL) without a result; the "
                               "kernel recorded no out-of-memory kill, so something else did")
    else:
        how = f"crashed: {sig}" if sig else f"exited with status {rc}"
        result["error"] = f"the judge process {how} without a result"
    result["traceback"] = truncate(stderr, 8000)
    return result


class Stopped(Exception):
    """Its runner asked the evaluation to stop (run_job's `stop`: its submission cancelled)."""


def run_job(job: Job, *, on_event: Callable[[dict], None] | None = None,
            stop: threading.Event | None = None) -> Result:
    """Evaluate `job` in a sandboxed process tree; block until done; return the result dict.
    Once `stop` is set (by another thread: the runner's lease heartbeat), the evaluation ends
    within about a second, wherever it is: its process tree killed as after its time limit,
    its wait for the device given up, the device's admission released."""
    t_begin = time.monotonic()

    def emit(event: dict) -> None:
        if on_event is not None:
            try:
                on_event(event)
            except Exception:
                pass

    emit({"type": "phase", "phase": "starting"})
    try:
        job = normalize_job(job)
    except JobError as exc:
        result = _base_result(None)
        result["error"] = f"bad job: {exc}"
        emit({"type": "phase", "phase": "done"})
        return result
    try:
        result = _run_job(job, emit, t_begin, stop)
    except Stopped:
        result = _stopped(job)
    emit({"type": "phase", "phase": "done"})
    return result


def _run_job(job: dict, emit: Callable[[dict], None], t_begin: float,
             stop: threading.Event | None) -> Result:
    # On a device shared by several evaluations, start only once this one's memory fits beside
    # theirs (gate.py); the runner renews its claim meanwhile (the events).
    def waiting(waited_s: float) -> None:
        if stop is not None and stop.is_set():
            raise Stopped  # the admission's entries go with the wait (gate.admitted)
        emit({"type": "phase", "phase": "waiting_for_memory", "waited_s": round(waited_s, 1)})

    # A cold extension build first, admitted for its processes alone (builds_ahead).
    built = _build_ahead(job, emit, waiting, stop) if builds_ahead(job) else None
    if built is not None and built.get("verdict") == "compile_error":
        return with_build_ahead(built, built)  # the verdict: it would not build inside either

    with _admitted(job, job["memory_need_bytes"], waiting) as admission_wait_s:
        # One admitted with all the device to itself starts no spare beside it either.
        result = _run_admitted(job, emit, t_begin, refill=not _holds_whole_device(job),
                               stop=stop)
    if admission_wait_s > 0.05:
        result.setdefault("phases", {})["admission_wait"] = admission_wait_s
    if _may_run_again_alone(job, result):
        result = _run_again_alone(job, result, emit, waiting, stop)
    if built is not None:
        result = with_build_ahead(result, built)
    return result


def _stopped(job: dict) -> Result:
    result = _base_result(job)
    result["error"] = "stopped by its runner before it ended (its submission was cancelled)"
    return json_safe(result)


def builds_ahead(job: dict) -> bool:
    """Whether the candidate is built before its evaluation is admitted: on a device whose
    memory several evaluations share, a source that builds an extension its owner's cache does
    not hold yet. A cold build holds the host a minute or more and little device memory; built
    inside the evaluation, it kept all the memory the evaluation expects from the others
    meanwhile (issue 41: builds of 53 to 74 s on an H100, each holding a 6 GiB-tensor problem's
    57.75 GiB while smaller evaluations waited behind it). On a device of its own nothing waits
    for it."""
    if job.get("mode", "evaluate") != "evaluate" or not _shares_device(job):
        return False
    if not backends.builds_extension(job["backend"], job["candidate_source"]):
        return False
    entry = buildcache.entry_for(job)
    return entry is not None and not entry.is_dir()


def _build_ahead(job: dict, emit: Callable[[dict], None], waiting: Callable[[float], None],
                 stop: threading.Event | None) -> Result:
    """The candidate built into its owner's cache by a compile-only job (judge.py), sandboxed as
    an evaluation is, with its own time limit. It runs the candidate's code (its module, its
    model's construction), so it is in the device's ledger as any evaluation is, for its
    processes' memory (`build_need_bytes`, at least a byte: a run alone waits for it); its
    processes stand still while another evaluation is timed (gate.py). It decides nothing but
    a build that fails; a build that never finished leaves nothing in the cache, and a
    finished one is its owner's alone, as an evaluation's build would be (buildcache.py)."""
    with _admitted(job, max(1, job["build_need_bytes"]), waiting):
        return _run_admitted({**job, "mode": "compile"}, emit, time.monotonic(),
                             keep_unfinished=False, stop=stop)


# The share of its time limit an evaluation waits for device memory before it takes a
# reservation (gate.admitted). A run alone waits for the device at most a time limit for each
# evaluation that may share it, plus a minute: its reservation keeps newcomers out, so only the
# running evaluations and the runs alone reserved before it (each within its limit) come first.
ADMISSION_WAIT_SHARE = 0.5
ALONE_WAIT_SLACK_S = 60.0


def _admitted(job: dict, need_bytes: int, waiting: Callable[[float], None]):
    """Admission of `need_bytes` on the job's device (gate.admitted). Past a share of its time
    limit, a job still waiting for memory holds a reservation that newcomers wait behind; it
    never starts beside memory it does not fit."""
    return gate.admitted(job["gate_dir"], need_bytes, job["device_memory_bytes"],
                         on_wait=waiting, max_wait_s=ADMISSION_WAIT_SHARE * job["time_limit_s"])


def _may_run_again_alone(job: dict, result: dict) -> bool:
    """Whether an evaluation that ran out of memory gets a run alone: where its own profiling
    process (shared device or not), or other evaluations, could have held memory beside it.
    One whose expected need is the whole device's was admitted only with no other evaluation
    running, and none could join it; without a profiling process it has already run alone."""
    if result.get("verdict") != "out_of_memory":
        return False
    if starts_profiling_process(job):
        return True
    return _shares_device(job) and job["memory_need_bytes"] < job["device_memory_bytes"]


def _shares_device(job: dict) -> bool:
    """Admitted through the device's memory ledger (gate.admitted): a gate, and both sizes."""
    return (bool(job.get("gate_dir")) and job["memory_need_bytes"] > 0
            and job["device_memory_bytes"] > 0)


def _holds_whole_device(job: dict) -> bool:
    """Admitted only with no other evaluation on its device (gate.admitted), none joining."""
    return _shares_device(job) and job["memory_need_bytes"] >= job["device_memory_bytes"]


def _alone_wait_s(job: dict) -> float:
    return job["device_slots"] * job["time_limit_s"] + ALONE_WAIT_SLACK_S


def _run_again_alone(job: dict, first: dict, emit: Callable[[dict], None],
                     waiting: Callable[[float], None], stop: threading.Event | None) -> Result:
    """Out of memory beside other evaluations: their memory may be what it lacked (a problem's
    expected need is an estimate), so it runs again with the device's memory to itself, before
    its verdict is given, with its whole time limit: the time its first run lost beside a
    neighbour, and the wait for the device, are not the kernel's. On a fresh seed: the first
    run saw its inputs, and a kernel could run out of memory on purpose to meet them again."""
    import secrets

    seed = secrets.randbits(62)
    while seed == job["seed"]:
        seed = secrets.randbits(62)
    about_first = {"verdict": first.get("verdict"), "error": first.get("error"),
                   "seed": job["seed"]}
    try:
        with gate.admitted(job["gate_dir"], job["device_memory_bytes"],
                           job["device_memory_bytes"], on_wait=waiting, alone=True,
                           give_up=True, max_wait_s=_alone_wait_s(job)) as waited_s:
            # No process of ours beside it either: no profiling process (the timed worker
            # makes the profiled call after the timing) and no spare for the next job.
            alone = {**job, "seed": seed, "memory_need_bytes": job["device_memory_bytes"],
                     "profile_process": False}
            result = _run_admitted(alone, emit, time.monotonic(), refill=False, stop=stop)
    except TimeoutError:
        first.setdefault("environment", {})["sharing"] = {
            "run_again_alone": False,
            "why": f"the device did not come free within {_alone_wait_s(job):.0f} s"}
        return first
    phases = result.setdefault("phases", {})
    phases["admission_wait"] = (first.get("phases") or {}).get("admission_wait", 0.0) + waited_s
    result.setdefault("environment", {})["sharing"] = {"run_again_alone": True,
                                                       "first_run": about_first}
    # Both seeds are the submission's now: a later re-verification uses neither.
    seeds = result.get("seeds")
    if isinstance(seeds, dict):
        seeds["earlier_runs"] = [job["seed"]]
    return result


@dataclass
class _Watch:
    """What the runner saw of a running judge: its result, or why it has none."""

    result: Any = None  # what the judge sent as its result (a dict, unless it misbehaved)
    done: bool = False  # a result came
    last_progress: dict[str, Any] = field(default_factory=dict)
    process_start_s: float | None = None  # the judge's first event
    startup_s: float | None = None  # both processes up, torch imported, the reference loaded
    timed_out: bool = False
    slot_over: bool = False
    stopped: bool = False  # its runner asked it to stop (run_job's `stop`)


def _run_admitted(job: dict, emit: Callable[[dict], None], t_begin: float, *,
                  refill: bool = True, keep_unfinished: bool = True,
                  stop: threading.Event | None = None) -> Result:
    """`keep_unfinished`: whether the build slot goes back to the cache even where the
    candidate's module never finished loading (a build ahead keeps only a finished one)."""
    limit = job["time_limit_s"]
    isolation, prefix = isolation_prefix(job["device"])

    def launch_for(spare: bool, for_job: dict = job) -> pool.Launch:
        return pool.spawn(for_job, prefix=prefix, isolation=isolation, env_for=scrubbed_env,
                          spare=spare)

    try:
        launch = pool.POOL.take(pool.spec_keys(job, isolation)) or launch_for(False)
    except jail.SandboxUnavailable as exc:
        # No sandbox, no candidate code: the evaluation ends here, the submission is kept.
        result = _base_result(job)
        result["error"] = f"this runner cannot sandbox candidate code: {exc}"
        return json_safe(result)
    spare_ready = launch.spare and launch.ready()
    # The owner's build of this exact source, if any, goes into the worker's fresh slot.
    cache_entry = buildcache.entry_for(job)
    cache_hit = buildcache.fill(launch.slot, cache_entry, uid=launch.jail.get("uid"))
    # A cached build loads in seconds, so the judge holds the device while it loads (judge.py).
    job["build_cached"] = cache_hit
    # The clock starts when the job is handed over (a spare may have waited long for it).
    t_spawn = time.monotonic()
    # The judge stops itself a little earlier, so that it can still report (with the logs).
    job["deadline_epoch"] = time.time() + limit - min(10.0, max(1.0, 0.1 * limit))
    oom_before = oom_kill_count()
    try:
        _send_job(launch, job)
        # The next evaluation's processes start now, next to this one, and are stopped while
        # this one is timed (pool.py).
        if refill:
            pool.POOL.refill(lambda: launch_for(True, pool.spare_job(job)))
        watch = _watch(launch, emit, t_spawn=t_spawn, deadline=t_spawn + limit, stop=stop)
        # Whatever is left of the tree goes now: leftovers of a finished run, or a timed-out one.
        t_cleanup = time.monotonic()
        rc, cgroup_seen, judge_log = _end_tree(launch)
        if watch.slot_over:
            cache_outcome = "slot_over_limit"
        elif keep_unfinished or buildcache.module_loaded(watch.result):
            cache_outcome = buildcache.keep(launch.slot, cache_entry)
        else:
            # Part of a build: kept, the evaluation's load would count as a cached one and
            # hold the device while it built the rest (judge.load_holds_device).
            cache_outcome = "unfinished"
    finally:
        pool.POOL.resume()
        launch.discard()

    if watch.stopped:  # the tree is gone and the slot back: nothing of it is a verdict
        raise Stopped
    result = _outcome(job, watch, rc, judge_log, oom_before)
    env = result.get("environment") or {}
    env["sandbox"] = _sandbox_facts(job, launch, isolation=isolation, spare_ready=spare_ready,
                                    build_cache={"hit": cache_hit, "outcome": cache_outcome})
    env["limits"] = limits.report(job, launch.jail, cgroup_seen)
    result["environment"] = env
    phases = result.get("phases") or {}
    if watch.process_start_s is not None:
        phases["process_start"] = watch.process_start_s
    if watch.startup_s is not None:
        phases["startup"] = watch.startup_s
    phases["cleanup"] = time.monotonic() - t_cleanup
    phases["total"] = time.monotonic() - t_begin
    result["phases"] = phases
    result["correct"] = result.get("verdict") == "correct"
    return cap_result(json_safe(result))


def _send_job(launch: pool.Launch, job: dict) -> None:
    """The job, written to the judge from a thread of its own (a large job fills the pipe)."""
    job_w, launch.job_w = launch.job_w, -1  # the sending thread closes it

    def send_job() -> None:
        try:
            with os.fdopen(job_w, "wb") as f:
                f.write(json.dumps(job).encode())
        except OSError:
            pass

    threading.Thread(target=send_job, daemon=True).start()


def _watch(launch: pool.Launch, emit: Callable[[dict], None], *, t_spawn: float,
           deadline: float, stop: threading.Event | None = None) -> _Watch:
    """The judge's events until its result, its end, the time limit, a slot grown past its
    limit or a stop request (both checked once a second). Progress is passed on; the spare is
    stopped while this evaluation is timed."""
    watch = _Watch()
    next_slot_check = time.monotonic()
    buf = b""
    with os.fdopen(launch.ev_r, "rb", buffering=0) as events:
        launch.ev_r = -1  # owned by `events` now
        while not watch.done:
            left = deadline - time.monotonic()
            if left <= 0:
                watch.timed_out = True
                break
            if time.monotonic() >= next_slot_check:
                next_slot_check = time.monotonic() + 1.0
                watch.slot_over = limits.slot_over(launch)
                watch.stopped = stop is not None and stop.is_set()
                if watch.slot_over or watch.stopped:
                    break
            ready, _, _ = select.select([events], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = events.read(65536)
            if not chunk:
                break  # the judge closed its end: finished or died
            buf += chunk
            while b"\n" in buf and not watch.done:
                line, buf = buf.split(b"\n", 1)
                _take_event(watch, line, emit, t_spawn=t_spawn)
    return watch


def _take_event(watch: _Watch, line: bytes, emit: Callable[[dict], None], *,
                t_spawn: float) -> None:
    try:
        event = json.loads(line)
    except ValueError:
        return
    if not isinstance(event, dict) or event.get("type") == "spare_ready":
        return
    if event.get("type") == "result":
        watch.result = event.get("result")
        watch.done = watch.result is not None
        return
    if watch.process_start_s is None:
        watch.process_start_s = time.monotonic() - t_spawn
    if watch.startup_s is None and event.get("phase") == "compiling":
        watch.startup_s = time.monotonic() - t_spawn
    if event.get("type") in ("phase", "trial"):
        watch.last_progress[event["type"]] = event
    if event.get("phase") == "timing":
        pool.POOL.pause()
    elif event.get("phase") == "profiling":
        # The timing is over; the spare gets ready during the untimed checks after it (on a
        # GPU the profiled call takes seconds).
        pool.POOL.resume()
    emit(event)


def _end_tree(launch: pool.Launch) -> tuple[int | None, dict[str, Any], dict[str, str]]:
    """Kill what is left of the evaluation, and wait until nothing is, before the slot is
    read: its sandbox's processes die with their pid namespace, asynchronously. They are
    recognised by the candidate's own uid (which they cannot change) where it has one, else by
    the evaluation's token in their environment (which a process could overwrite). Returns
    the judge's exit status, what its cgroup saw and the judge's own log."""
    launch.kill_group()
    try:
        rc = launch.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        rc = None
    for _ in range(100):
        if kill_tagged(launch.token, uid=launch.jail.get("uid")) == 0:
            break
        time.sleep(0.05)
    cgroup_seen = limits.cgroup_stats(launch.jail.get("cgroup"))
    judge_log = {"stdout": launch.out_log.text(wait=1.0), "stderr": launch.err_log.text(wait=1.0)}
    return rc, cgroup_seen, judge_log


def _outcome(job: dict, watch: _Watch, rc: int | None, judge_log: dict[str, str],
             oom_before: int | None) -> dict[str, Any]:
    """The judge's result, or the runner's verdict where it has none: the slot over its
    limit, the time limit, or the judge's death."""
    result = watch.result if isinstance(watch.result, dict) else None
    if watch.slot_over:
        result = _base_result(job)
        result["verdict"] = "runtime_error"
        result["error"] = (f"the build folder grew past {buildcache.SLOT_MB} MiB (deleted files "
                           "still held open count too) or too many files; the evaluation was "
                           "stopped and nothing of it was kept")
    elif watch.timed_out:
        result = _base_result(job)
        result["verdict"] = "timeout"
        where = watch.last_progress.get("phase", {}).get("phase", "starting")
        if where == "checking" and "trial" in watch.last_progress:
            t = watch.last_progress["trial"]
            where += f", trial {t.get('k')} of {t.get('n')}"
        result["error"] = (f"the evaluation exceeded its time limit of {job['time_limit_s']:g} s "
                           f"(during {where})")
    elif result is None:
        result = _judge_died(job, rc, judge_log.get("stderr", ""), oom_before)
    for key, value in _base_result(job).items():
        result.setdefault(key, value)
    return result


def _sandbox_facts(job: dict, launch: pool.Launch, *, isolation: str, spare_ready: bool,
                   build_cache: dict[str, Any]) -> dict[str, Any]:
    """How the evaluation was confined, for its result's environment."""
    jailed = launcher.sandboxed(launch.jail)
    return {
        # The candidate's sandbox (jail.py, launcher.py).
        "engine": "bubblewrap" if jailed else "none",
        "candidate_uid": launch.jail.get("uid") if jailed else None,
        "seccomp": jailed,
        "namespaces": (["mount", "pid", "network", "ipc", "uts", "cgroup"]
                       + (["user"] if launch.jail.get("uid") is None else [])) if jailed else [],
        "tmpfs_mb": job["limits"].get("tmpfs_mb") if jailed else None,
        "build_cache": build_cache,
        "network_isolated": jailed,
        "pid_namespace": jailed,
        # The judge's own process (trusted) is started under `unshare` where the host allows.
        "judge_isolation": isolation,
        "scrubbed_env": True,
        "fresh_workdir": True,
        "rlimits": dict(job["limits"]),
        "time_limit_s": job["time_limit_s"],
        "parent_death_signal": parent_death_signal_available(),
        "prestarted": launch.spare,
        "prestarted_ready": spare_ready,
        # Wall clock: when its processes were started (a spare: ahead, during an earlier
        # evaluation), set beside other evaluations' timings (bench/gpu_sharing.py).
        "launched_epoch": time.time() - (time.monotonic() - launch.spawned_at),
        "prestart_hits": pool.POOL.hits,
    }
