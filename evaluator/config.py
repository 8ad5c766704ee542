"""Job defaults and validation. No torch here: the runner process imports this module."""

from __future__ import annotations

import os
from typing import Any

from evaluator import backends
from evaluator.types import Job

BACKENDS = backends.NAMES
PRECISIONS = ("fp32", "fp16", "bf16")
# "compile" builds (and caches) the candidate only, e.g. ahead of its evaluation.
MODES = ("evaluate", "compile")

# KernelBench's tolerances: fp32 1e-4 by default, fp16/bf16 1e-2 (used for both atol and rtol).
DEFAULT_TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}

DEFAULT_TIMING: dict[str, Any] = {
    "warmup": 3,  # untimed calls before measuring (compilation caches, allocator, clocks)
    "min_reps": 20,
    "max_reps": 500,
    # Stop once the standard error of the median is below this share of the median. 0.15%
    # keeps the medians of 5 repeated evaluations within 1% of each other even for calls
    # varying by 1-3% with outliers (tests/harness/test_speed_timing.py simulates it; 0.5%
    # with at least 10 calls failed that a third of the time at 1% noise). A steady GPU kernel
    # stops after 20 calls; KernelBench takes the mean of 100.
    "target_rel_err": 0.0015,
    "max_seconds": 10.0,  # cap on the timed loop of one model (warm-up excluded)
    "sets": 3,  # distinct input sets used in rotation, so no per-input caching pays
    "flush_l2": True,  # GPU only
    # Warm up for at least this long too (GPU clocks ramp up under load; after the seconds an
    # evaluation spends starting and checking, the first tens of milliseconds of a small
    # kernel ran measurably slower on an H200).
    "warmup_ms": 100.0,
    # CPU only: intra-op threads for both sides (see timing.py: several threads make the
    # figures depend on the host's load at the moment each side is timed).
    "cpu_threads": 1,
}

# On a CPU shared with other work, calls vary far more than repetitions can average out (both
# sides end at max_reps either way): fewer of them, to keep a CPU evaluation short. Each call
# costs the judge a fresh draw of the inputs and a check of the whole output besides the call
# (about 15 ms a call on the 1M-element sample ReLU, where the call is 0.3 ms): 200 a side
# made the timing 6 of an evaluation's 8 s. 100 keep the median's standard error near 1%.
CPU_TIMING: dict[str, Any] = {"max_reps": 100, "warmup_ms": 25.0}


def default_timing(device: str) -> dict[str, Any]:
    """The timing settings a job on this device gets unless it names its own."""
    return {**DEFAULT_TIMING, **(CPU_TIMING if device == "cpu" else {})}


def _env_limit(name: str, default: Any) -> Any:
    """A limit the runner's operator sets in its environment: a number of MiB, "auto", or
    "none" (no limit)."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value == "none":
        return None
    if value == "auto":
        return value
    # A typo here must stop the runner with its name, not somewhere deep in an evaluation.
    if not value.isdigit() or int(value) <= 0:
        raise ValueError(f"{name}={value!r}: expected a number of MiB, 'auto' or 'none'")
    return int(value)


DEFAULT_LIMITS: dict[str, Any] = {
    # RLIMIT_AS of the candidate worker, in MiB. "auto": 3/4 of the host's memory on the CPU,
    # none on a GPU (CUDA reserves huge virtual ranges and breaks under RLIMIT_AS).
    "address_space_mb": "auto",
    "open_files": 4096,
    # RLIMIT_NPROC counts every process and thread of the user, so it is only a loose bound.
    "processes": 4096,
    # RLIMIT_FSIZE, in MiB: the largest file the candidate's processes may write (the build's
    # objects, the channel's memfd that carries its outputs on the CPU). "auto": a quarter of
    # the host's memory, between 2 and 16 GiB (process.resolve_file_size_bytes).
    "file_size_mb": _env_limit("KB_SANDBOX_FILE_SIZE_MB", "auto"),
    "core_dumps": False,
    # The size of the sandbox's private tmpfs (its home, work folder and /tmp; /dev/shm gets a
    # quarter more), in MiB: the candidate's disk outside its build slot. Held in memory.
    "tmpfs_mb": 2048,
    # The memory of all of an evaluation's sandboxed processes together, tmpfs and memfd pages
    # included (its cgroup's memory.max, where the runner can make one: limits.limit_job), in
    # MiB. "auto": three quarters of the host's memory.
    "memory_mb": _env_limit("KB_SANDBOX_MEMORY_MB", "auto"),
}

# An evaluation's time limit and its correctness trials, here once: the site's defaults
# (settings.EVALUATION_TIME_LIMIT), the runner's jobs and `kb check` read them from here.
DEFAULT_TIME_LIMIT_S = 300.0
DEFAULT_N_TRIALS = 5
DEFAULT_LOG_LIMIT = 64 * 1024  # bytes kept per stream (head and tail), with a marker between
DEFAULT_PROFILER_PATIENCE_S = 30.0  # workers.Profiler: a wait for its process, each step


class JobError(ValueError):
    """The job itself is malformed (a harness_error, never the candidate's fault)."""


def is_cuda_device(device: str) -> bool:
    return device == "cuda" or device.startswith("cuda:")


def normalize_job(job: Job) -> Job:
    """Return a full copy of `job` with defaults filled in; raise JobError on bad values."""
    if not isinstance(job, dict):
        raise JobError("job must be a dict")
    out = dict(job)
    out.setdefault("mode", "evaluate")
    for key in ("reference_source", "candidate_source"):
        if out["mode"] in MODES and not isinstance(out.get(key), str):
            raise JobError(f"{key} must be a string")
    out.setdefault("backend", "torch")
    if out["backend"] not in BACKENDS:
        raise JobError(f"unknown backend {out['backend']!r}")
    out.setdefault("precision", "fp32")
    if out["precision"] not in PRECISIONS:
        raise JobError(f"unknown precision {out['precision']!r}")
    default_tol = DEFAULT_TOLERANCE[out["precision"]]
    for key in ("atol", "rtol"):
        value = out.get(key)
        out[key] = float(default_tol if value is None else value)
    out["device"] = str(out.get("device") or "cpu")
    if out["device"] != "cpu" and not is_cuda_device(out["device"]):
        raise JobError(f"unknown device {out['device']!r}")
    if not backends.get(out["backend"]).runs_on(out["device"]):
        raise JobError(f"backend {out['backend']!r} needs a CUDA device")
    seed = out.get("seed")
    if seed is None:
        # A seed the submitter cannot know; the server normally picks and stores it.
        seed = int.from_bytes(os.urandom(8), "little") >> 1
    out["seed"] = int(seed)
    out["n_trials"] = int(out.get("n_trials") or DEFAULT_N_TRIALS)
    if out["n_trials"] < 1:
        raise JobError("n_trials must be at least 1")
    timing = default_timing(out["device"])
    timing.update(out.get("timing") or {})
    out["timing"] = timing
    limits = dict(DEFAULT_LIMITS)
    limits.update(out.get("limits") or {})
    out["limits"] = limits
    out.setdefault("build_dir", None)
    out["time_limit_s"] = float(out.get("time_limit_s") or DEFAULT_TIME_LIMIT_S)
    out["log_limit"] = int(out.get("log_limit") or DEFAULT_LOG_LIMIT)
    # Set to False to skip timing (correctness only), e.g. for quick checks.
    out.setdefault("measure", True)
    # A device shared by several evaluations (gate.py): the runner names its gate folder, the
    # memory this evaluation is expected to need and the device's; without them, no sharing.
    out["gate_dir"] = str(out["gate_dir"]) if out.get("gate_dir") else None
    out["memory_need_bytes"] = max(0, int(out.get("memory_need_bytes") or 0))
    out["device_memory_bytes"] = max(0, int(out.get("device_memory_bytes") or 0))
    # What a compile-only job ahead of the evaluation is expected to hold (runner/sandbox.py).
    out["build_need_bytes"] = max(0, int(out.get("build_need_bytes") or 0))
    # How many evaluations may share the device: what bounds a run alone's wait for it.
    out["device_slots"] = max(1, int(out.get("device_slots") or 1))
    # The profiled call in a process of its own (workers.Profiler): on a GPU by default, where
    # starting the profiler costs seconds; on the CPU the timed worker makes it (no CUPTI).
    value = out.get("profile_process")
    out["profile_process"] = (out["device"] != "cpu") if value is None else bool(value)
    # Whether the spare started beside this job gets one (pool.spare_job): what the runner's
    # next evaluation usually asks for, where this one's problem was too big for it.
    value = out.get("spare_profile_process")
    out["spare_profile_process"] = out["profile_process"] if value is None else bool(value)
    # The backend the spare is prepared for (on the CPU its sandbox's environment depends on
    # it): the runner names the one of the row its fair rule takes next, else this job's.
    spare_backend = out.get("spare_backend")
    out["spare_backend"] = (spare_backend if isinstance(spare_backend, str)
                            and spare_backend in backends.NAMES else out["backend"])
    # How long the judge waits for the profiling process at each step (its start and profiler,
    # then its load and calls) before it gives up on it, and the timed worker makes the
    # profiled call: a kernel's first call there can autotune again, but the wait holds the
    # device shared, so it is never the whole time limit.
    out["profiler_patience_s"] = float(out.get("profiler_patience_s")
                                       or DEFAULT_PROFILER_PATIENCE_S)
    return out


def starts_profiling_process(job: dict) -> bool:
    """Whether the judge makes the profiled call in a process of its own (workers.Profiler),
    which holds one more copy of the problem's tensors beside the evaluation: a timed
    evaluation, on a normalized job that asks for one."""
    return (bool(job.get("profile_process")) and job.get("mode") == "evaluate"
            and bool(job.get("measure", True)))


def peak_rate(peak_tflops: Any, precision: str) -> float | None:
    """The hardware's peak rate (TFLOP/s) for a precision: one number, or one per precision."""
    if isinstance(peak_tflops, (int, float)) and not isinstance(peak_tflops, bool):
        return float(peak_tflops) if peak_tflops > 0 else None
    if isinstance(peak_tflops, dict):
        value = peak_tflops.get(precision)
        if isinstance(value, (int, float)) and value > 0:
            return float(value)
    return None
