"""Fair share at claim time (evaluation/fairness.py): a runner's task claims the next row by the
rule (round-robin by account, oldest first within one, an operator's weights), not the row its
message named; the queue position follows the same rule. Through the real database and the
runner's services, the sandboxed child replaced by canned results (tests/conftest.FakeHarness)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from evaluation import fairness
from evaluation.models import AccountWeight, Runner
from evaluation.services import hardware_register
from gpu_runner.services import evaluate_submission, reverify_submission
from submissions.models import Evaluation, Reverification, Submission
from submissions.queues import fair_sources
from submissions.runs.models import Model, Run
from submissions.selectors import queue_estimate, queue_position
from tests.leaderboard_factory import make_problem, make_submission

pytestmark = pytest.mark.django_db


@pytest.fixture
def cpu(db):
    return hardware_register(slug="cpu", name="CPU", kind="cpu", backends=["torch"])


@pytest.fixture(autouse=True)
def no_record_checks(settings):
    """Re-verifications only where a test makes them."""
    settings.REVERIFY_NEW_RECORDS = False


@pytest.fixture
def problem(db):
    return make_problem(1, 1)


@pytest.fixture
def accounts(django_user_model):
    return {name: django_user_model.objects.create_user(name, password="a-long-passphrase-1")
            for name in ("ada", "bob", "cy")}


def queue(problem, hardware, user, count: int = 1, **fields) -> list[Submission]:
    made = []
    for _ in range(count):
        submission = make_submission(problem=problem, hardware=hardware, user=user)
        Submission.objects.filter(pk=submission.pk).update(**{
            "status": Submission.Status.QUEUED, "verdict": "", "finished_at": None,
            "created_at": timezone.now(), **fields})
        submission.refresh_from_db()
        made.append(submission)
    return made


def claimed_order() -> list[int]:
    return list(Submission.objects.filter(started_at__isnull=False)
                .order_by("started_at").values_list("pk", flat=True))


def owner(pk: int) -> str:
    return Submission.objects.get(pk=pk).user.username


def test_a_second_account_is_claimed_second_at_the_latest_behind_eight(
    cpu, problem, accounts, harness
):
    """Ada queues 8, one is taken; Bob then submits: the next task, whichever row it names,
    claims Bob's. Then Ada's run oldest first; a surplus task finds nothing; none runs twice."""
    ada = queue(problem, cpu, accounts["ada"], 8)
    for _ in range(9):
        harness.will_return()
    assert evaluate_submission(submission_id=ada[0].pk, runner_name="r1") == "correct"
    bob = queue(problem, cpu, accounts["bob"])[0]
    assert queue_position(bob) == 1
    # The task of Ada's second submission runs next: it claims Bob's.
    assert evaluate_submission(submission_id=ada[1].pk, runner_name="r1") == "correct"
    assert claimed_order()[:2] == [ada[0].pk, bob.pk]
    for row in ada[2:] + [bob]:  # the rest of the tasks, Bob's included
        evaluate_submission(submission_id=row.pk, runner_name="r1")
    assert claimed_order() == [ada[0].pk, bob.pk] + [s.pk for s in ada[1:]]
    # A redelivered or surplus task finds nothing to claim.
    assert evaluate_submission(submission_id=ada[3].pk, runner_name="r1") == "not claimed"
    assert Evaluation.objects.count() == 9
    assert set(Submission.objects.values_list("status", flat=True)) == {"finished"}


def test_an_account_submitting_at_the_same_time_goes_second_then_alternates(
    cpu, problem, accounts, harness
):
    ada = queue(problem, cpu, accounts["ada"], 3)
    bob = queue(problem, cpu, accounts["bob"], 3)
    assert [queue_position(s) for s in bob] == [2, 4, 6]
    for _ in range(6):
        harness.will_return()
        evaluate_submission(submission_id=ada[0].pk, runner_name="r1")
    assert [owner(pk) for pk in claimed_order()] == ["ada", "bob"] * 3


def test_an_operators_weight_gives_an_account_that_many_turns_per_round(
    cpu, problem, accounts, harness
):
    AccountWeight.objects.create(user=accounts["ada"], weight=2, note="lab RL account")
    rows = {name: queue(problem, cpu, user, 4) for name, user in accounts.items()}
    expected = ["ada", "ada", "bob", "cy", "ada", "ada", "bob", "cy"]
    # The position shown plays the same rule forward.
    shown = sorted((queue_position(s), name) for name, mine in rows.items() for s in mine)
    assert [name for _, name in shown][:8] == expected
    for _ in range(8):
        harness.will_return()
        evaluate_submission(submission_id=rows["cy"][0].pk, runner_name="r1")
    assert [owner(pk) for pk in claimed_order()] == expected


def test_a_model_runs_samples_are_its_owners_and_share_their_turns(
    cpu, problem, accounts, harness
):
    run = Run.objects.create(name="r", model=Model.objects.create(litellm_name="m"),
                             hardware=cpu, created_by=accounts["ada"])
    mine = queue(problem, cpu, accounts["ada"])[0]
    samples = queue(problem, cpu, None, 2, run=run)
    bob = queue(problem, cpu, accounts["bob"])[0]
    # Ada's own and her run's samples are one account: Bob goes second.
    assert [queue_position(s) for s in (mine, bob, *samples)] == [1, 2, 3, 4]


def test_a_reverification_takes_its_owners_turn(cpu, problem, accounts, harness):
    """Ada's would-be record does not jump the queue: its re-verification is her turn, and Bob,
    not served yet, goes first."""
    held = queue(problem, cpu, accounts["ada"])[0]
    harness.will_return()
    evaluate_submission(submission_id=held.pk, runner_name="r1")
    reverification = Reverification.objects.create(
        submission=held, reason=Reverification.Reason.ADMIN,
        checked_evaluation=held.evaluations.get(), avoid_runner="r1")
    bob = queue(problem, cpu, accounts["bob"])[0]
    assert queue_position(bob) == 1
    harness.will_return()
    harness.will_return()
    # The re-verification's own task, on another runner, claims Bob's submission first.
    assert reverify_submission(reverification_id=reverification.pk, runner_name="r2") == "correct"
    assert Submission.objects.get(pk=bob.pk).status == "finished"
    reverification.refresh_from_db()
    assert reverification.status == "queued"
    evaluate_submission(submission_id=bob.pk, runner_name="r2")
    reverification.refresh_from_db()
    assert reverification.status != "queued" and reverification.claimed_by == "r2"


def test_a_runner_to_avoid_leaves_the_reverification_and_takes_the_next_fair_row(
    cpu, problem, accounts, harness
):
    held = queue(problem, cpu, accounts["ada"])[0]
    harness.will_return()
    evaluate_submission(submission_id=held.pk, runner_name="r1")
    Runner.objects.create(name="r2", hardware=cpu, last_seen=timezone.now())
    reverification = Reverification.objects.create(
        submission=held, reason=Reverification.Reason.ADMIN,
        checked_evaluation=held.evaluations.get(), avoid_runner="r1",
        enqueued_at=timezone.now())
    assert reverify_submission(reverification_id=reverification.pk,
                               runner_name="r1") == "left for another runner"
    reverification.refresh_from_db()
    assert (reverification.status, reverification.enqueued_at) == ("queued", None)


def test_the_rule_reads_only_recent_turns_and_rows_that_can_be_claimed(cpu, problem, accounts):
    old = queue(problem, cpu, accounts["ada"])[0]
    # Served two days ago: as due as an account never served.
    Submission.objects.filter(pk=old.pk).update(
        status="finished", started_at=timezone.now() - timedelta(days=2))
    ada = queue(problem, cpu, accounts["ada"])[0]
    bob = queue(problem, cpu, accounts["bob"])[0]
    running = queue(problem, cpu, accounts["cy"], status="running",
                    lease_expires_at=timezone.now() + timedelta(minutes=1))[0]
    order = [(w.source, w.pk) for w in fairness.ordered(fair_sources(cpu.pk))]
    assert order == [(0, ada.pk), (0, bob.pk)]
    assert queue_position(running) is None
    assert queue_estimate(bob)["position"] == 2
