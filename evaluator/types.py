"""The harness's job and result, typed once for the harness and the runner.

A job crosses from the runner (gpu_runner/services.py build_job, gpu_runner/curation.py) into
the sandboxed judge as JSON, and the result comes back the same way, so both are plain dicts;
these TypedDicts name their keys. `config.normalize_job` fills every key a job leaves out.
"""

from typing import Any, Literal, TypedDict

Mode = Literal["evaluate", "compile", "validate", "baseline"]


class Job(TypedDict, total=False):
    mode: Mode
    reference_source: str
    candidate_source: str  # absent in validate and baseline jobs
    backend: str  # torch, triton, cuda, cpp
    precision: str  # fp32, fp16, bf16
    atol: float | None  # None: the precision's default (config.DEFAULT_TOLERANCE)
    rtol: float | None
    device: Literal["cpu", "cuda"]
    seed: int  # chosen by the runner per evaluation; the inputs derive from it
    n_trials: int
    timing: dict[str, Any]  # overrides of config.DEFAULT_TIMING
    limits: dict[str, Any]  # overrides of config.DEFAULT_LIMITS
    time_limit_s: float
    build_dir: str  # the build cache's root (evaluator/runner/buildcache.py)
    build_owner: str  # whose cache namespace this candidate builds in
    peak_bandwidth_gbs: float | None  # the hardware's speed of light, for the flags
    peak_tflops: dict[str, float]
    log_limit: int
    measure: dict[str, Any]
    baseline_modes: list[str]
    batch: list[dict[str, Any]]  # several references in one validation process
    deadline_epoch: float


class Stats(TypedDict, total=False):
    median_ms: float
    mean_ms: float
    std_ms: float
    mad_ms: float  # median absolute deviation: the interval's spread (evaluation/stats.py)
    min_ms: float
    max_ms: float
    n: int


class Result(TypedDict, total=False):
    mode: Mode
    verdict: str  # one of verdicts.HARNESS_VERDICTS
    correct: bool
    error: str
    traceback: str
    compile_log: str | dict[str, str]
    logs: str | dict[str, str]
    trials: list[dict[str, Any]]
    candidate: Stats
    reference: Stats
    speedup: float | None
    flags: list[str]
    checks: dict[str, Any]  # the evidence behind each flag
    # GPU: {"candidate": {"kernels": [...], "device_total_us"}, "reference": {...}, "basis"}
    profile: dict[str, Any]
    static_report: dict[str, Any]
    environment: dict[str, Any]  # devices, versions, the sandbox's layers
    seeds: dict[str, Any]
    phases: dict[str, float]  # seconds per phase
    evaluator_version: str
    # validate and baseline jobs
    status: str
    findings: list[dict[str, str]]
    peak_memory_bytes: int | None
    tolerance: dict[str, Any]
    notes: list[str]


def blank_result(*, verdict: str | None, seeds: dict[str, Any],
                 evaluator_version: str) -> dict[str, Any]:
    """The keys every evaluation's result starts with, empty: the judge fills them in, and
    the runner returns them as they are when the judge never reported."""
    return {
        "verdict": verdict,
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
        "seeds": seeds,
        "phases": {},
        "logs": {"stdout": "", "stderr": ""},
        "evaluator_version": evaluator_version,
        "pids": [],
    }
