"""Nothing is lost: runners killed mid-evaluation, and submissions that keep killing them.

A runner that dies stops renewing its lease; the heartbeat sweep of any runner
(`gpu_runner.leased.sweep`) finds the lapsed lease and queues the work again, and a row that
killed `SUBMISSION_MAX_ATTEMPTS` runners is stopped instead. The in-process tests play the dead
runner (a claim whose lease is then set in the past), call the sweep, and run the queued tasks
as the next runner's worker would, with the stand-in harness. One test kills a real runner
process. The same lifecycle, kind by kind, is tests/test_leases.py.
"""

import signal
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from django.utils.module_loading import import_string
from django_q.models import OrmQ

from evaluation import leases
from gpu_runner import leased
from problems.curation import validation_request
from problems.models import Validation
from problems.services import problem_upsert
from submissions.models import Evaluation, Submission
from submissions.services import submission_create
from tests.conftest import kernel_source, stats, stop_process, wait_for

PROBLEMS = Path(__file__).resolve().parent / "problems"

# Short leases so a dead runner's claim lapses in seconds rather than a minute.
FAST_RECOVERY = {"RUNNER_LEASE_SECONDS": "3"}


def slow_kernel(seconds: int) -> str:
    return kernel_source("relu_slow.py").replace("__SLEEP_SECONDS__", str(seconds))


def submit(user, problem, hardware, source) -> Submission:
    return submission_create(
        user=user, problem=problem, source=source, backend="torch", hardware=hardware
    )


def status_of(submission: Submission) -> str:
    return Submission.objects.get(pk=submission.pk).status


@pytest.fixture(autouse=True)
def no_reverification(settings):
    # As the real runners of these tests have it (tests/conftest.py, process_env): a first
    # correct result would otherwise also queue a re-verification.
    settings.REVERIFY_NEW_RECORDS = False


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """Call a service, then run what it left for after the commit (task enqueues, events)."""

    def call(service, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return service(**kwargs)

    return call


def swept(kind: leases.Kind, hardware) -> int:
    """One heartbeat sweep; how many rows of `kind` it queued again."""
    return leased.sweep(hardware=hardware)[kind.name]


def die_holding(row, *, runner_name: str) -> None:
    """A runner claims `row` and dies: its lease is never renewed and lapses."""
    assert row.claim(runner_name=runner_name, lease_seconds=60)
    type(row).objects.filter(pk=row.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )


@pytest.fixture
def next_runner(monkeypatch, django_capture_on_commit_callbacks):
    """Run every task queued for the cpu hardware, oldest first, as a runner's worker does."""

    def drain(name: str = "next:1") -> list[str]:
        monkeypatch.setenv("KBSITE_RUNNER_NAME", name)
        outcomes = []
        while queued := OrmQ.objects.filter(key="cpu").order_by("pk").first():
            task = queued.task
            queued.delete()
            with django_capture_on_commit_callbacks(execute=True):
                outcomes.append(import_string(task["func"])(*task["args"], **task["kwargs"]))
        return outcomes

    return drain


@pytest.mark.django_db
def test_a_submission_whose_runner_died_is_requeued_by_the_sweep_and_evaluated_once(
    user, cpu_hardware, relu_problem, harness, committed, next_runner
):
    submission = committed(
        submit, user=user, problem=relu_problem, hardware=cpu_hardware,
        source=kernel_source("relu_correct.py"),
    )
    die_holding(submission, runner_name="dead:1")
    assert swept(leased.SUBMISSION, cpu_hardware) == 1
    assert status_of(submission) == Submission.Status.QUEUED

    # The original task (redelivered) and the sweep's: the claim lets exactly one through.
    harness.will_return(ms=1.0)
    assert sorted(next_runner()) == ["correct", "not claimed"]
    submission.refresh_from_db()
    assert (submission.status, submission.verdict) == ("finished", "correct")
    assert submission.attempts == 2
    assert Evaluation.objects.filter(submission=submission).count() == 1
    assert len(harness.jobs) == 1


@pytest.mark.django_db
def test_a_submission_that_keeps_killing_runners_is_stopped_while_the_queue_drains(
    user, cpu_hardware, relu_problem, harness, committed, next_runner, settings
):
    poison = committed(
        submit, user=user, problem=relu_problem, hardware=cpu_hardware, source=slow_kernel(60)
    )
    behind = [
        committed(
            submit, user=user, problem=relu_problem, hardware=cpu_hardware,
            source=kernel_source("relu_correct.py"),
        )
        for _ in range(3)
    ]
    for attempt in range(1, settings.SUBMISSION_MAX_ATTEMPTS):
        poison.refresh_from_db()
        die_holding(poison, runner_name=f"dead:{attempt}")
        assert poison.attempts == attempt
        assert swept(leased.SUBMISSION, cpu_hardware) == 1
    # The last runner it may kill: the sweep stops it rather than queue it again.
    poison.refresh_from_db()
    die_holding(poison, runner_name=f"dead:{settings.SUBMISSION_MAX_ATTEMPTS}")
    assert swept(leased.SUBMISSION, cpu_hardware) == 0

    for _ in behind:
        harness.will_return(ms=1.0)
    outcomes = next_runner()
    assert outcomes.count("correct") == 3  # its earlier tasks find nothing to claim
    poison.refresh_from_db()
    assert (poison.status, poison.verdict) == ("finished", Evaluation.Verdict.RUNNER_CRASH)
    assert "died" in poison.evaluations.get().error
    # The poison never reached a sandbox again; the three behind it were each evaluated once.
    assert len(harness.jobs) == 3
    assert all(job["candidate_source"] == kernel_source("relu_correct.py") for job in harness.jobs)
    for submission in behind:
        submission.refresh_from_db()
        assert submission.verdict == "correct"
        assert submission.evaluations.count() == 1


@pytest.mark.django_db
def test_a_validation_whose_runner_died_is_requeued_by_the_sweep_and_finished_by_the_next(
    cpu_hardware, harness, committed, next_runner
):
    problem = problem_upsert(
        level=1, number=83, name="Slow", source=(PROBLEMS / "sound.py").read_text()
    ).problem
    validation = committed(validation_request, problem=problem, hardware=cpu_hardware)
    die_holding(validation, runner_name="dead:1")
    assert validation.status == Validation.Status.RUNNING

    assert swept(leased.VALIDATION, cpu_hardware) == 1
    validation.refresh_from_db()
    assert validation.status == Validation.Status.QUEUED

    harness.will_answer(
        {"mode": "validate", "status": "passed", "findings": [], "reference": stats(2.0)}
    )
    outcomes = next_runner()
    assert Validation.Status.PASSED in outcomes
    validation.refresh_from_db()
    assert validation.status == Validation.Status.PASSED, validation.findings
    assert validation.attempts == 2 and validation.lease_expires_at is None
    assert [job["mode"] for job in harness.jobs] == ["validate"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_a_submission_whose_runner_was_killed_is_evaluated_exactly_once_by_the_next_runner(
    user, cpu_hardware, relu_problem, start_runner
):
    """Slow: a real runner process killed with SIGKILL mid-evaluation (its sandboxed child
    and django-q cluster with it), and a second real runner whose heartbeat loop finds the
    lapsed lease and evaluates the submission for real: the in-process tests above only play
    the dead runner."""
    submission = submit(user, relu_problem, cpu_hardware, slow_kernel(6))
    first = start_runner(**FAST_RECOVERY)
    wait_for(lambda: status_of(submission) == Submission.Status.RUNNING, timeout=120)
    stop_process(first, sig=signal.SIGKILL)
    assert status_of(submission) == Submission.Status.RUNNING  # left behind, mid-evaluation

    start_runner(**FAST_RECOVERY)
    wait_for(lambda: status_of(submission) == Submission.Status.FINISHED, timeout=180)
    submission.refresh_from_db()
    assert submission.verdict == "correct"
    assert submission.attempts == 2
    assert Evaluation.objects.filter(submission=submission).count() == 1
