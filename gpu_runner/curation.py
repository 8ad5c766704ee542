"""The runner's side of curation (flow 4): validating a problem's reference, and measuring its
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

from evaluation.harness import sandbox
from evaluation.models import Baseline, Hardware, Validation
from problems.baselines import baseline_record
from problems.models import Problem

log = logging.getLogger(__name__)

# Validation only needs a rough time; baselines use the evaluator's full timing defaults.
VALIDATION_TIMING = {"warmup": 2, "min_reps": 5, "max_reps": 50, "max_seconds": 2.0, "sets": 2}
BASELINE_MODES = (Baseline.Mode.EAGER, Baseline.Mode.COMPILE)


def device_for(hardware: Hardware) -> str:
    return "cpu" if hardware.kind == Hardware.Kind.CPU else "cuda"


def validation_job(validation: Validation, *, seed: int) -> dict:
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
    }


def validate_problem(*, validation_id: int, runner_name: str) -> str:
    """Run one queued validation if this runner wins the claim; returns its final status."""
    validation = Validation.objects.select_related("problem_version__problem", "hardware").get(
        pk=validation_id
    )
    if not validation.claim(runner_name=runner_name):
        return "not claimed"
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
    validation_store(validation, result, seed=seed, time_limit_s=job["time_limit_s"])
    return validation.status


def validation_store(
    validation: Validation, result: dict, *, seed: int, time_limit_s: float
) -> Validation:
    """Turn the harness's result into the Validation's findings, and move the problem on."""
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
        validation.finish(
            findings=findings,
            failed=failed,
            peak_memory_bytes=result.get("peak_memory_bytes"),
            reference_ms=reference.get("median_ms"),
            details=details,
            error=str(result.get("error") or ""),
            environment=result.get("environment") or {},
        )
        problem = Problem.objects.select_for_update().get(pk=validation.problem_version.problem_id)
        if (
            validation.status == Validation.Status.PASSED
            and problem.current_version_id == validation.problem_version_id
        ):
            problem.mark_validated()
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
    }


def baselines_measure(
    *,
    hardware: Hardware,
    problems: Iterable[Problem],
    modes: Iterable[str] = BASELINE_MODES,
    time_limit_s: float | None = None,
    on_outcome: Callable[[BaselineOutcome], None] | None = None,
) -> list[BaselineOutcome]:
    """Time each problem's reference on this host's device (which must be `hardware`), eager
    and under torch.compile, by the evaluator's timing method; store a Baseline per mode."""
    modes = [str(m) for m in modes]
    limit = float(time_limit_s or settings.EVALUATION_TIME_LIMIT)
    outcomes = []
    for problem in problems:
        if problem.current_version_id is None:
            continue
        started = time.monotonic()
        outcome = BaselineOutcome(problem=problem)
        try:
            result = sandbox.run_job(baseline_job(problem, hardware, modes=modes,
                                                  time_limit_s=limit))
        except Exception as error:  # the harness failed on this one; the others still run
            log.exception("harness failed measuring %s", problem.slug)
            result = {"verdict": "harness_error", "error": str(error)}
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
        outcome.seconds = time.monotonic() - started
        outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)
    return outcomes
