"""Builders for leaderboard tests: stored results without running a kernel.

The leaderboard only reads what the runner stores, so these write the same rows the runner
writes (a finished Submission and its Evaluation) and refresh what follows from it (the board,
a run's sample) inside the same transaction, as gpu_runner/services.py does.
"""

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from leaderboard.services import board_refresh_for
from problems.models import Problem, source_hash
from problems.services import problem_upsert
from submissions.models import Evaluation, Submission
from submissions.runs.samples import run_sample_refresh

REFERENCE = "import torch\n\n\nclass Model(torch.nn.Module):\n    pass  # {tag}\n"


def make_problem(level: int, number: int, *, status: str = Problem.Status.PUBLISHED) -> Problem:
    problem = problem_upsert(
        level=level, number=number, name=f"P{number}", source=REFERENCE.format(tag=number)
    ).problem
    Problem.objects.filter(pk=problem.pk).update(status=status)
    problem.refresh_from_db()
    return problem


_clock = {"t": None}


def tick() -> datetime:
    """Strictly increasing finish times, so the order of results is the order of the calls."""
    now = timezone.now()
    _clock["t"] = now if _clock["t"] is None or now > _clock["t"] else _clock["t"]
    _clock["t"] += timedelta(seconds=1)
    return _clock["t"]


def make_submission(
    *, problem, hardware, user=None, model=None, run=None, sample_index=0, backend="cuda"
) -> Submission:
    source = f"# kernel {timezone.now().timestamp()} {id(object())}\n"
    return Submission.objects.create(
        user=user,
        model=model,
        run=run,
        sample_index=sample_index,
        problem=problem,
        problem_version=problem.current_version,
        hardware=hardware,
        backend=backend,
        source=source,
        source_hash=source_hash(source),
        status=Submission.Status.FINISHED,
    )


def make_result(
    *,
    problem,
    hardware,
    user=None,
    model=None,
    run=None,
    sample_index: int = 0,
    verdict: str = "correct",
    ms: float | None = 1.0,
    reference_ms: float = 2.0,
    speedup_eager: float | None = None,
    speedup_compile: float | None = None,
    flags: tuple[str, ...] = (),
    submission: Submission | None = None,
    purpose: str = Evaluation.Purpose.SUBMISSION,
    trials: list | None = None,
    refresh: bool = True,
) -> Evaluation:
    """A stored evaluation (a new submission unless one is given), refreshed like the runner."""
    with transaction.atomic():
        if submission is None:
            submission = make_submission(
                problem=problem,
                hardware=hardware,
                user=user,
                model=model,
                run=run,
                sample_index=sample_index,
            )
        attempt = submission.evaluations.count() + 1
        correct = verdict == "correct"
        timed = ms is not None and verdict in ("correct", "incorrect", "rejected")
        evaluation = Evaluation.objects.create(
            submission=submission,
            attempt=attempt,
            purpose=purpose,
            hardware=hardware,
            problem_version=submission.problem_version,
            verdict=verdict,
            correct=correct,
            candidate_median_ms=ms if timed else None,
            reference_median_ms=reference_ms if timed else None,
            speedup=reference_ms / ms if timed and correct else None,
            speedup_eager=speedup_eager,
            speedup_compile=speedup_compile,
            candidate_stats=(
                {
                    "median_ms": ms,
                    "mean_ms": ms * 1.1,
                    "std_ms": 0.01,
                    "min_ms": ms * 0.9,
                    "max_ms": ms * 1.5,
                    "n": 20,
                }
                if timed
                else None
            ),
            flags=list(flags),
            trials=trials
            if trials is not None
            else ([{"k": 1, "passed": correct}] if verdict in ("correct", "incorrect") else []),
            error="" if correct else f"{verdict} happened",
            source_hash=submission.source_hash,
            finished_at=tick(),
        )
        if refresh:
            refresh_results(evaluation)
    return evaluation


def refresh_results(evaluation: Evaluation) -> None:
    """What the runner refreshes once it stores an evaluation (gpu_runner.services'
    _refresh_boards): the board, and the run's sample where the submission is a run's."""
    board_refresh_for(evaluation)
    run_sample_refresh(submission=evaluation.submission)
