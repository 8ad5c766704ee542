"""The runner's side of curation: validating a problem's reference, and measuring its
baselines, each in the sandboxed harness exactly like an evaluation (reference code never runs
in a process that holds database settings).

No database transaction is open while the reference runs.
"""

import logging
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from evaluation import leases
from evaluation.models import Hardware
from evaluator.runner import sandbox
from evaluator.types import Job, Result
from gpu_runner.sharing import sharing_fields
from problems.baselines import baseline_record
from problems.curation import validation_settle
from problems.models import Baseline, Problem, Validation

log = logging.getLogger(__name__)

# Validation only needs a rough time; baselines use the evaluator's full timing defaults.
VALIDATION_TIMING = {"warmup": 2, "min_reps": 5, "max_reps": 30, "max_seconds": 1.0, "sets": 2}
BASELINE_MODES = (Baseline.Mode.EAGER, Baseline.Mode.COMPILE)


def device_for(hardware: Hardware) -> str:
    return "cpu" if hardware.kind == Hardware.Kind.CPU else "cuda"


def validation_job(validation: Validation, *, seed: int) -> Job:
    problem = validation.problem_version.problem
    return {
        "mode": "validate",
        "reference_source": validation.problem_version.source,
        "precision": problem.precision,
        "atol": problem.atol,
        "rtol": problem.rtol,
        "device": device_for(validation.hardware),
        "seed": seed,
        "timing": dict(VALIDATION_TIMING),
        "build_dir": str(settings.BUILD_CACHE_DIR),
        "time_limit_s": settings.EVALUATION_TIME_LIMIT,
        **sharing_fields(validation.hardware, validation.problem_version),
    }


def validate_problem(*, validation_id: int, runner_name: str) -> str:
    """Run one queued validation if this runner wins the claim; returns its final status."""
    validation = Validation.objects.select_related("problem_version__problem", "hardware").get(
        pk=validation_id
    )
    lease_seconds = settings.RUNNER_LEASE_SECONDS
    if not validation.claim(runner_name=runner_name, lease_seconds=lease_seconds):
        return "not claimed"
    with leases.kept([validation], runner_name=runner_name, lease_seconds=lease_seconds):
        _validate_one(validation, runner_name=runner_name)
    return validation.status


def _validate_one(validation: Validation, *, runner_name: str) -> None:
    # A fresh seed per validation, kept with it, so the run can be repeated exactly.
    seed = secrets.randbits(62)
    job = validation_job(validation, seed=seed)

    def on_event(event: dict) -> None:
        if event.get("type") == "phase":
            Validation.objects.filter(pk=validation.pk, status=Validation.Status.RUNNING).update(
                details={"progress": event.get("phase")}
            )

    try:
        result = sandbox.run_job(job, on_event=on_event)
    except Exception as error:  # the harness itself failed: record it, never leave it running
        log.exception("harness failed on validation %s", validation.pk)
        result = {"verdict": "harness_error", "error": str(error)}
    validation_store(
        validation, result, seed=seed, time_limit_s=job["time_limit_s"], runner_name=runner_name
    )


def validations_run(
    *,
    validations: Iterable[Validation],
    runner_name: str,
    batch_size: int = 1,
    on_done: Callable[[Validation], None] | None = None,
) -> list[Validation]:
    """Run queued validations on this host (a bulk run from the command line).

    With batch_size > 1, several references share one sandboxed process, which spares a process
    start and device initialisation each; whatever a batch does not finish (a crash, a hang)
    is run again alone, so the culprit gets its own finding and the others their results.
    """
    validations = list(validations)
    lease_seconds = settings.RUNNER_LEASE_SECONDS
    claimed = []
    for start in range(0, len(validations), max(1, batch_size)):
        # Claimed a batch at a time, each lease kept while it runs: a claim made long before
        # its turn would lapse, and a runner's sweep would hand it to another host.
        chunk = [
            v for v in validations[start:start + max(1, batch_size)]
            if v.claim(runner_name=runner_name, lease_seconds=lease_seconds)
        ]
        claimed += chunk
        with leases.kept(chunk, runner_name=runner_name, lease_seconds=lease_seconds):
            done = _validate_batch(chunk, runner_name=runner_name) if len(chunk) > 1 else set()
            for validation in chunk:
                if validation.pk not in done:
                    _validate_one(validation, runner_name=runner_name)
                if on_done is not None:
                    on_done(validation)
    return claimed


def _validate_batch(chunk: list[Validation], *, runner_name: str) -> set[int]:
    by_key = {str(v.pk): v for v in chunk}
    seeds = {v.pk: secrets.randbits(62) for v in chunk}
    job = validation_job(chunk[0], seed=0)
    limit = job["time_limit_s"]
    job["time_limit_s"] = limit * len(chunk)
    job["batch"] = [
        {
            "key": str(v.pk),
            "reference_source": v.problem_version.source,
            "precision": v.problem_version.problem.precision,
            "atol": v.problem_version.problem.atol,
            "rtol": v.problem_version.problem.rtol,
            "seed": seeds[v.pk],
        }
        for v in chunk
    ]
    done: set[int] = set()

    def on_event(event: dict) -> None:
        validation = by_key.get(str(event.get("key"))) if event.get("type") == "item" else None
        if validation is not None and isinstance(event.get("result"), dict):
            validation_store(
                validation, event["result"], seed=seeds[validation.pk], time_limit_s=limit,
                runner_name=runner_name,
            )
            done.add(validation.pk)

    try:
        sandbox.run_job(job, on_event=on_event)
    except Exception:  # what the batch did not finish runs alone below
        log.exception("harness failed on a validation batch")
    return done


def validation_store(
    validation: Validation, result: Result, *, seed: int, time_limit_s: float, runner_name: str
) -> Validation:
    """Turn the harness's result into the Validation's findings, and move the problem on, while
    `runner_name` still holds its lease (otherwise the runner that took over decides)."""
    status = result.get("status")
    if result.get("mode") == "validate" and status in ("passed", "flagged", "failed"):
        findings = [
            {"code": str(f.get("code", "")), "message": str(f.get("message", ""))}
            for f in result.get("findings") or []
            if isinstance(f, dict)
        ]
        failed = status == "failed"
    elif result.get("verdict") == "timeout":
        findings = [{
            "code": "timeout",
            "message": f"The validation did not finish within {time_limit_s:g} s on "
            f"{validation.hardware.slug}: the reference hangs, or is far too slow for this "
            f"hardware ({result.get('error', '')}).",
        }]
        failed = True
    else:
        error = result.get("error") or "no result"
        hint = ""
        if "without a result" in error:
            hint = " (the reference probably crashed it, or used more memory than the host has)"
        findings = [{
            "code": "validation_error",
            "message": "The validation could not complete, so nothing is known about this "
            f"reference yet: {error}{hint}. Fix the cause and validate again.",
        }]
        failed = True
    reference = result.get("reference") or {}
    details = {
        "seed": seed,
        "checks": result.get("checks") or {},
        "notes": result.get("notes") or [],
        "reference": reference,
        "tolerance": result.get("tolerance") or {},
        "phases": result.get("phases") or {},
        "evaluator_version": result.get("evaluator_version") or "",
    }
    if result.get("traceback"):
        details["traceback"] = str(result["traceback"])[-8000:]
    with transaction.atomic():
        finished = validation.finish(
            runner_name=runner_name,
            findings=findings,
            failed=failed,
            peak_memory_bytes=result.get("peak_memory_bytes"),
            reference_ms=reference.get("median_ms"),
            details=details,
            error=str(result.get("error") or ""),
            environment=result.get("environment") or {},
        )
        if finished:
            validation_settle(validation=validation)
    if not finished:
        log.warning("%s was finished elsewhere; result dropped", validation)
    return validation


# --- baselines -----------------------------------------------------------------------------------


@dataclass
class BaselineOutcome:
    problem: Problem
    stored: dict[str, Baseline] = field(default_factory=dict)  # mode -> row
    errors: dict[str, str] = field(default_factory=dict)  # mode -> why it has no figure
    seconds: float = 0.0


def baseline_job(
    problem: Problem, hardware: Hardware, *, modes: Iterable[str], time_limit_s: float
) -> dict:
    return {
        "mode": "baseline",
        "reference_source": problem.current_version.source,
        "precision": problem.precision,
        "device": device_for(hardware),
        # The same seed for every measurement of a problem: its baselines compare like for like.
        "seed": problem.pk,
        "baseline_modes": list(modes),
        "build_dir": str(settings.BUILD_CACHE_DIR),
        "time_limit_s": time_limit_s,
        **sharing_fields(hardware, problem.current_version),
    }


def baselines_compile_ahead(
    *,
    hardware: Hardware,
    problems: Iterable[Problem],
    workers: int,
    time_limit_s: float | None = None,
) -> dict[str, str]:
    """Build each problem's torch.compile graphs into the build cache, `workers` problems at a
    time (compiling is CPU work), nothing timed: the timed pass of `baselines_measure` after it
    then finds them in the cache instead of compiling one problem after another while the GPU
    waits. Returns slug -> why, for the problems that did not compile (the timed pass reports
    them again)."""
    from concurrent.futures import ThreadPoolExecutor

    limit = float(time_limit_s or settings.EVALUATION_TIME_LIMIT)
    jobs = {}
    for problem in problems:
        if problem.current_version_id is None:
            continue
        job = baseline_job(problem, hardware, modes=["compile"], time_limit_s=limit)
        job["measure"] = False
        jobs[problem.slug] = job

    def warm(slug: str) -> tuple[str, str]:
        try:
            result = sandbox.run_job(jobs[slug])
        except Exception as error:  # the harness failed on this one; the rest still compile
            return slug, str(error)
        if result.get("compile"):
            return slug, ""
        return slug, (result.get("errors") or {}).get("compile") or result.get("error") or "?"

    with ThreadPoolExecutor(max_workers=max(1, workers)) as threads:
        outcomes = list(threads.map(warm, jobs))
    return {slug: why for slug, why in outcomes if why}


def baselines_measure(
    *,
    hardware: Hardware,
    problems: Iterable[Problem],
    modes: Iterable[str] = BASELINE_MODES,
    time_limit_s: float | None = None,
    batch_size: int = 1,
    on_outcome: Callable[[BaselineOutcome], None] | None = None,
) -> list[BaselineOutcome]:
    """Time each problem's reference on this host's device (which must be `hardware`), eager
    and under torch.compile, by the evaluator's timing method; store a Baseline per mode.

    With batch_size > 1 several references share one sandboxed process (see validations_run);
    what a batch does not finish is measured again alone.
    """
    modes = [str(m) for m in modes]
    limit = float(time_limit_s or settings.EVALUATION_TIME_LIMIT)
    todo = [p for p in problems if p.current_version_id is not None]
    outcomes = []
    for start in range(0, len(todo), max(1, batch_size)):
        chunk = todo[start:start + max(1, batch_size)]
        results: dict[int, tuple[dict, float]] = {}
        if len(chunk) > 1:
            results = _baseline_batch(chunk, hardware, modes=modes, time_limit_s=limit)
        for problem in chunk:
            if problem.pk in results:
                result, seconds = results[problem.pk]
            else:
                started = time.monotonic()
                job = baseline_job(problem, hardware, modes=modes, time_limit_s=limit)
                try:
                    result = sandbox.run_job(job)
                except Exception as error:  # the harness failed on this one; the rest still run
                    log.exception("harness failed measuring %s", problem.slug)
                    result = {"verdict": "harness_error", "error": str(error)}
                seconds = time.monotonic() - started
            outcome = _baseline_store(problem, hardware, result, modes)
            outcome.seconds = seconds
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
    return outcomes


def _baseline_batch(
    chunk: list[Problem], hardware: Hardware, *, modes: list[str], time_limit_s: float
) -> dict[int, tuple[dict, float]]:
    job = baseline_job(chunk[0], hardware, modes=modes, time_limit_s=time_limit_s * len(chunk))
    job["batch"] = [
        {"key": str(p.pk), "reference_source": p.current_version.source,
         "precision": p.precision, "seed": p.pk}
        for p in chunk
    ]
    results: dict[int, tuple[dict, float]] = {}
    last = time.monotonic()

    def on_event(event: dict) -> None:
        nonlocal last
        if event.get("type") == "item" and isinstance(event.get("result"), dict):
            now = time.monotonic()
            results[int(event["key"])] = (event["result"], now - last)
            last = now

    try:
        sandbox.run_job(job, on_event=on_event)
    except Exception:  # what the batch did not finish is measured alone
        log.exception("harness failed on a baseline batch")
    return results


def _baseline_store(
    problem: Problem, hardware: Hardware, result: dict, modes: list[str]
) -> BaselineOutcome:
    outcome = BaselineOutcome(problem=problem)
    environment = result.get("environment") or {}
    for mode in modes:
        stats = result.get(mode) if result.get("mode") == "baseline" else None
        if not stats or stats.get("median_ms") is None:
            outcome.errors[mode] = (
                (result.get("errors") or {}).get(mode) or result.get("error") or "no figure"
            )
            continue
        outcome.stored[mode] = baseline_record(
            problem=problem,
            hardware=hardware,
            mode=mode,
            stats=stats,
            torch_version=str(environment.get("torch") or ""),
            problem_version=problem.current_version,
            environment={
                "hardware": environment.get("device_name") or hardware.name,
                "device": environment.get("device") or device_for(hardware),
                "cuda": environment.get("cuda"),
                "triton": environment.get("triton"),
                "host": environment.get("host"),
                "evaluator_version": result.get("evaluator_version"),
            },
        )
    return outcome
