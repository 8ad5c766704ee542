"""Nothing is lost: runners killed with SIGKILL, and submissions that keep killing them."""

import signal
from pathlib import Path

import pytest

from problems.curation import validation_request
from problems.models import Validation
from problems.services import problem_upsert
from submissions.models import Evaluation, Submission
from submissions.services import submission_create
from tests.conftest import kernel_source, stop_process, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

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


def kill_runner(process) -> None:
    stop_process(process, sig=signal.SIGKILL)


def test_a_submission_whose_runner_was_killed_is_evaluated_exactly_once_by_the_next_runner(
    user, cpu_hardware, relu_problem, start_runner
):
    submission = submit(user, relu_problem, cpu_hardware, slow_kernel(6))
    first = start_runner(**FAST_RECOVERY)
    wait_for(lambda: status_of(submission) == Submission.Status.RUNNING, timeout=120)
    kill_runner(first)
    assert status_of(submission) == Submission.Status.RUNNING  # left behind, mid-evaluation

    start_runner(**FAST_RECOVERY)
    wait_for(lambda: status_of(submission) == Submission.Status.FINISHED, timeout=180)
    submission.refresh_from_db()
    assert submission.verdict == "correct"
    assert submission.attempts == 2
    assert Evaluation.objects.filter(submission=submission).count() == 1


@pytest.mark.timeout(1200)
def test_a_submission_that_keeps_killing_runners_is_stopped_while_the_queue_drains(
    user, cpu_hardware, relu_problem, start_runner, settings
):
    poison = submit(user, relu_problem, cpu_hardware, slow_kernel(60))
    behind = [
        submit(user, relu_problem, cpu_hardware, kernel_source("relu_correct.py")) for _ in range(3)
    ]
    for attempt in range(1, settings.SUBMISSION_MAX_ATTEMPTS + 1):
        runner = start_runner(**FAST_RECOVERY)
        wait_for(
            lambda attempt=attempt: Submission.objects.filter(
                pk=poison.pk, status=Submission.Status.RUNNING, attempts=attempt
            ).exists(),
            timeout=180,
        )
        kill_runner(runner)

    start_runner(**FAST_RECOVERY)
    everything = [poison, *behind]
    # The poison's end and three evaluations after the last restart: in the full suite on a
    # 2-core machine they once took longer than 240 s (the whole test alone: 255 s).
    wait_for(
        lambda: all(status_of(s) == Submission.Status.FINISHED for s in everything), timeout=480
    )
    poison.refresh_from_db()
    assert poison.verdict == Evaluation.Verdict.RUNNER_CRASH
    assert "died" in poison.evaluations.get().error
    for submission in behind:
        submission.refresh_from_db()
        assert submission.verdict == "correct"
        assert submission.evaluations.count() == 1


def test_a_validation_whose_runner_was_killed_is_finished_by_the_next_runner(
    cpu_hardware, start_runner
):
    # A reference that takes a few seconds to import: long enough to kill its runner mid-way.
    source = "import time\n\ntime.sleep(6)\n" + (PROBLEMS / "sound.py").read_text()
    problem = problem_upsert(level=1, number=83, name="Slow", source=source).problem
    validation = validation_request(problem=problem, hardware=cpu_hardware)

    def status() -> str:
        return Validation.objects.get(pk=validation.pk).status

    first = start_runner(**FAST_RECOVERY)
    wait_for(lambda: status() == Validation.Status.RUNNING, timeout=120)
    kill_runner(first)
    assert status() == Validation.Status.RUNNING  # left behind, mid-validation

    start_runner(**FAST_RECOVERY)
    wait_for(
        lambda: status() not in (Validation.Status.QUEUED, Validation.Status.RUNNING), timeout=180
    )
    validation.refresh_from_db()
    assert validation.status == Validation.Status.PASSED, validation.findings
    assert validation.attempts == 2 and validation.lease_expires_at is None
