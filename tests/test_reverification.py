"""Re-verification: a new record ranks only after a second evaluation, with fresh secret seeds and
on another runner, agrees with the first; admins can ask for one too.

Most tests run the runner's services in this process on the real database, with the sandboxed
child replaced by canned results (the harness has its own tests); the last one runs two real
`manage.py runner` processes on the CPU.
"""

from datetime import timedelta

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from django_q.models import OrmQ, Task

from evaluation.models import Runner
from evaluation.services import runner_heartbeat
from gpu_runner import leased
from gpu_runner.services import evaluate_submission, reverify_submission
from leaderboard.models import BestEntry, Record
from leaderboard.selectors import board_rows
from submissions.models import Evaluation, Reverification, Submission
from submissions.services import submission_create
from tests.conftest import kernel_source, wait_for
from tests.leaderboard_factory import make_result

pytestmark = pytest.mark.django_db

PENDING = Submission.ReverificationState.PENDING


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """Call a service, then run what it left for after the commit (task enqueues, events)."""

    def call(service, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return service(**kwargs)

    return call


@pytest.fixture
def bob(db):
    return get_user_model().objects.create_user(username="bob", password="b-long-passphrase-2")


def live_runner(name: str, hardware) -> Runner:
    return runner_heartbeat(name=name, hardware=hardware, host="host", pid=1)


def submit(user, problem, hardware, source: str | None = None) -> Submission:
    return submission_create(
        user=user,
        problem=problem,
        source=source or kernel_source("relu_correct.py"),
        backend="torch",
        hardware=hardware,
    )


def reverify_tasks() -> list[list]:
    tasks = [q.task for q in OrmQ.objects.filter(key="cpu")]
    return [list(t["args"]) for t in tasks if t["func"] == "gpu_runner.tasks.reverify"]


def page(submission: Submission) -> str:
    return Client().get(submission.get_absolute_url()).content.decode()


@pytest.fixture
def held_record(user, cpu_hardware, relu_problem, harness, committed):
    """A first result on an empty board, evaluated by runner r1 while r2 is live too."""
    live_runner("r1", cpu_hardware)
    live_runner("r2", cpu_hardware)
    submission = submit(user, relu_problem, cpu_hardware)
    harness.will_return(ms=1.0)
    assert committed(evaluate_submission, submission_id=submission.pk, runner_name="r1") == (
        "correct"
    )
    submission.refresh_from_db()
    return submission


def test_a_new_record_is_held_pending_and_a_reverification_is_queued_after_commit(
    held_record, cpu_hardware, relu_problem
):
    submission = held_record
    first = submission.evaluations.get()
    assert (submission.verdict, submission.reverification) == ("correct", PENDING)

    reverification = Reverification.objects.get(submission=submission)
    assert reverification.reason == Reverification.Reason.NEW_RECORD
    assert reverification.status == Reverification.Status.QUEUED
    assert reverification.checked_evaluation == first
    assert reverification.avoid_runner == "r1"
    assert reverify_tasks() == [[reverification.pk]]
    assert reverification.enqueued_at is not None

    assert board_rows(problem=relu_problem, hardware=cpu_hardware) == []
    entry = BestEntry.objects.get(problem=relu_problem, hardware=cpu_hardware)
    assert entry.rank is None and entry.evaluation_id is None
    assert entry.pending_evaluation_id == first.pk
    assert not Record.objects.exists()
    assert "Re-verification with fresh seeds" in page(submission)
    assert "pending (queued)" in page(submission)


def test_a_passing_reverification_uses_a_fresh_seed_on_another_runner_and_then_ranks(
    held_record, cpu_hardware, relu_problem, harness, committed
):
    submission = held_record
    reverification = Reverification.objects.get(submission=submission)
    # 1% slower: within the two timings' 95% intervals (test_reverification_statistics.py).
    harness.will_return(ms=1.01)

    outcome = committed(reverify_submission, reverification_id=reverification.pk, runner_name="r2")

    assert outcome == "passed"
    reverification.refresh_from_db()
    first, second = reverification.checked_evaluation, reverification.evaluation
    assert second.purpose == Evaluation.Purpose.REVERIFY and second.runner_name == "r2"
    assert harness.jobs[1]["seed"] != harness.jobs[0]["seed"]
    assert second.seeds["server"] != first.seeds["server"]
    assert second.static_report["checks"]["reverification"]["first_median_ms"] == 1.0

    rows = board_rows(problem=relu_problem, hardware=cpu_hardware)
    # It ranks on the slower of the two: the second, here.
    assert [(r["rank"], r["participant"], r["candidate_ms"]) for r in rows] == [(1, "ada", 1.01)]
    record = Record.objects.get()
    assert (record.submission_id, record.evaluation_id) == (submission.pk, second.pk)
    submission.refresh_from_db()
    assert submission.reverification == Submission.ReverificationState.PASSED
    text = page(submission)
    assert "<strong>passed</strong>" in text
    assert "second evaluation: <span" in text and "by runner r2" in text


def test_a_reverification_that_is_incorrect_on_fresh_inputs_keeps_the_kernel_off_the_board(
    held_record, cpu_hardware, relu_problem, harness, committed
):
    submission = held_record
    reverification = Reverification.objects.get(submission=submission)
    harness.will_return(verdict="incorrect", ms=1.0)

    assert (
        committed(reverify_submission, reverification_id=reverification.pk, runner_name="r2")
        == "failed"
    )

    reverification.refresh_from_db()
    assert reverification.message.startswith(
        "The second evaluation, on fresh inputs, ended incorrect."
    )
    submission.refresh_from_db()
    assert submission.reverification == Submission.ReverificationState.FAILED
    assert submission.verdict == "correct"  # its own evaluation's; the re-verification overrides
    assert board_rows(problem=relu_problem, hardware=cpu_hardware) == []
    assert not Record.objects.exists()
    entry = BestEntry.objects.get(problem=relu_problem, hardware=cpu_hardware)
    assert entry.pending_evaluation_id is None and entry.rank is None
    text = page(submission)
    assert "<strong>failed</strong>" in text and "ended incorrect" in text


def test_a_reverification_whose_speedup_disagrees_is_not_held_on_two_but_goes_to_a_third(
    held_record, cpu_hardware, relu_problem, harness, committed
):
    reverification = Reverification.objects.get(submission=held_record)
    harness.will_return(ms=3.0)  # three times slower than the first evaluation said

    outcome = committed(reverify_submission, reverification_id=reverification.pk, runner_name="r2")

    assert outcome == "undecided: a third evaluation is queued"
    reverification.refresh_from_db()
    assert reverification.status == Reverification.Status.QUEUED
    assert reverification.disputed_evaluation.flags == []  # nothing decided on two
    assert reverify_tasks() == [[reverification.pk], [reverification.pk]]
    assert board_rows(problem=relu_problem, hardware=cpu_hardware) == []
    # The third and what follows: tests/test_reverification_rounds.py.


def test_a_result_that_sets_no_record_ranks_at_once_without_reverification(
    user, bob, cpu_hardware, relu_problem, harness, committed
):
    make_result(problem=relu_problem, hardware=cpu_hardware, user=bob, ms=0.5)
    submission = submit(user, relu_problem, cpu_hardware)
    harness.will_return(ms=1.0)

    committed(evaluate_submission, submission_id=submission.pk, runner_name="r1")

    assert not Reverification.objects.exists()
    rows = board_rows(problem=relu_problem, hardware=cpu_hardware)
    assert [(r["participant"], r["candidate_ms"]) for r in rows] == [("bob", 0.5), ("ada", 1.0)]


def test_the_first_runner_does_not_claim_the_reverification_while_another_runner_is_live(
    held_record, cpu_hardware, committed
):
    reverification = Reverification.objects.get(submission=held_record)

    assert not reverification.claim(runner_name="r1", lease_seconds=60)
    # Given the task, r1 hands it back for the heartbeat sweep to queue again.
    outcome = committed(reverify_submission, reverification_id=reverification.pk, runner_name="r1")
    assert outcome == "left for another runner"
    reverification.refresh_from_db()
    assert reverification.status == Reverification.Status.QUEUED
    assert reverification.enqueued_at is None

    OrmQ.objects.all().delete()
    assert leased.sweep(hardware=cpu_hardware)[leased.REVERIFICATION.name] == 1
    assert reverify_tasks() == [[reverification.pk]]
    # Queued once, not every sweep.
    assert leased.sweep(hardware=cpu_hardware)[leased.REVERIFICATION.name] == 0

    assert reverification.claim(runner_name="r2", lease_seconds=60)
    assert reverification.claimed_by == "r2"


def test_a_sole_runner_runs_its_own_reverification_only_after_the_grace_period(
    held_record, cpu_hardware, settings
):
    settings.REVERIFY_SOLE_RUNNER_GRACE_SECONDS = 120
    # r2 stops sending heartbeats: r1 is the only live runner left.
    Runner.objects.filter(name="r2").update(last_seen=timezone.now() - timedelta(hours=1))
    reverification = Reverification.objects.get(submission=held_record)

    assert not reverification.claim(runner_name="r1", lease_seconds=60)
    Reverification.objects.filter(pk=reverification.pk).update(
        created_at=timezone.now() - timedelta(seconds=121)
    )
    reverification.refresh_from_db()
    assert reverification.claim(runner_name="r1", lease_seconds=60)


def test_a_reverification_that_keeps_killing_runners_is_failed_not_retried(
    held_record, cpu_hardware, relu_problem, settings, committed
):
    reverification = Reverification.objects.get(submission=held_record)
    Reverification.objects.filter(pk=reverification.pk).update(
        attempts=settings.SUBMISSION_MAX_ATTEMPTS
    )

    outcome = committed(reverify_submission, reverification_id=reverification.pk, runner_name="r2")
    assert outcome == "not claimed"
    committed(leased.sweep, hardware=cpu_hardware)

    reverification.refresh_from_db()
    assert reverification.status == Reverification.Status.FAILED
    assert reverification.evaluation.verdict == Evaluation.Verdict.RUNNER_CRASH
    assert board_rows(problem=relu_problem, hardware=cpu_hardware) == []


def test_the_admin_action_queues_a_reverification_for_each_evaluated_submission(
    user, cpu_hardware, relu_problem, django_capture_on_commit_callbacks
):
    ranked = make_result(problem=relu_problem, hardware=cpu_hardware, user=user, ms=1.0)
    waiting = submit(user, relu_problem, cpu_hardware)
    admin = get_user_model().objects.create_superuser(
        username="root", password="r-long-passphrase-3", email="r@example.org"
    )
    client = Client()
    client.force_login(admin)

    def act():
        with django_capture_on_commit_callbacks(execute=True):
            return client.post(
                "/admin/submissions/submission/",
                {
                    "action": "reverify_submissions",
                    ACTION_CHECKBOX_NAME: [ranked.submission_id, waiting.pk],
                },
                follow=True,
            )

    text = act().content.decode()

    assert "Queued 1 re-verification(s)." in text
    assert f"Submission {waiting.pk} has not been evaluated yet." in text
    reverification = Reverification.objects.get()
    assert reverification.submission_id == ranked.submission_id
    assert reverification.reason == Reverification.Reason.ADMIN
    assert reverification.requested_by == admin
    assert reverification.checked_evaluation == ranked
    assert reverify_tasks() == [[reverification.pk]]
    # An audit does not take a ranked kernel off the board while it waits; a failure would.
    assert [r["participant"] for r in board_rows(problem=relu_problem, hardware=cpu_hardware)] == [
        "ada"
    ]

    again = act().content.decode()
    assert f"Submission {ranked.submission_id} is already being re-verified." in again
    assert Reverification.objects.count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
@pytest.mark.timeout(900)
def test_real_runners_hold_new_records_until_another_runner_reverifies_and_catch_a_replay(
    user, bob, cpu_hardware, relu_problem, start_runner
):
    """Slow: two real runner processes, the first handing the re-verification back and the
    second running it with fresh seeds in the real harness, which catches a kernel that is
    right only once; the tests above do the same with canned results."""
    env = {
        "REVERIFY_NEW_RECORDS": "1",
        # Long enough that the first runner, alone, must leave the re-verifications alone.
        "REVERIFY_SOLE_RUNNER_GRACE_SECONDS": "3600",
        # Two CPU runners on shared cores time noisily; the statistics are tested above.
        "TIMING_INTERVAL_FLOOR": "20",
    }
    honest = submit(user, relu_problem, cpu_hardware)
    once = submit(
        bob,
        relu_problem,
        cpu_hardware,
        kernel_source("relu_correct_once.py"),
    )
    start_runner(**env)

    def queued() -> int:
        return Reverification.objects.filter(status=Reverification.Status.QUEUED).count()

    wait_for(lambda: queued() == 2, timeout=300)
    assert [s.verdict for s in Submission.objects.order_by("pk")] == ["correct", "correct"]
    assert {s.reverification for s in Submission.objects.all()} == {PENDING}
    assert board_rows(problem=relu_problem, hardware=cpu_hardware) == []
    # The runner that did the first evaluations gets their tasks and hands them back.
    wait_for(
        lambda: any(
            task.result == "left for another runner"
            for task in Task.objects.filter(func="gpu_runner.tasks.reverify")
        ),
        timeout=60,
    )
    assert queued() == 2

    start_runner(**env)
    wait_for(
        lambda: not Reverification.objects.filter(status__in=Reverification.OPEN).exists(),
        timeout=400,
    )

    passed = Reverification.objects.get(submission=honest)
    caught = Reverification.objects.get(submission=once)
    assert (passed.status, caught.status) == ("passed", "failed"), (passed.message, caught.message)
    for reverification in (passed, caught):
        first, second = reverification.checked_evaluation, reverification.evaluation
        assert second.runner_name != first.runner_name
        assert second.seeds["server"] != first.seeds["server"]
    assert caught.evaluation.verdict == "incorrect"
    assert "ended incorrect" in caught.message

    rows = board_rows(problem=relu_problem, hardware=cpu_hardware)
    assert [(r["rank"], r["participant"]) for r in rows] == [(1, "ada")]
    assert list(Record.objects.values_list("submission_id", flat=True)) == [honest.pk]
    once.refresh_from_db()
    assert once.reverification == Submission.ReverificationState.FAILED
