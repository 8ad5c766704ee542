"""Fair share for a weighted competition (evaluation/fairness.py, issue 63): while a competition
with a queue weight above 1 runs, each entrant's entries are a lane of their own that takes that
many turns per round of an ordinary account; the entrant's other work stays in its account's
lane; once the competition ends its entries are ordinary work; a competition of weight 1
changes nothing. The queue position shown plays the same rule forward. Through the real
database and the runner's services, the sandboxed child replaced by canned results
(tests/conftest.FakeHarness)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from competitions.models import Competition, Entry
from evaluation import fairness
from evaluation.models import AccountWeight
from evaluation.services import hardware_register
from gpu_runner.services import evaluate_submission
from submissions.models import Reverification, Submission
from submissions.queues import fair_sources
from submissions.selectors import queue_position
from tests.leaderboard_factory import make_problem
from tests.test_fair_share import claimed_order, owner, queue

pytestmark = pytest.mark.django_db


@pytest.fixture
def cpu(db):
    return hardware_register(slug="cpu", name="CPU", kind="cpu", backends=["torch"])


@pytest.fixture
def problem(db):
    return make_problem(1, 1)


@pytest.fixture
def accounts(django_user_model):
    return {name: django_user_model.objects.create_user(name, password="a-long-passphrase-1")
            for name in ("ada", "bob")}


@pytest.fixture(autouse=True)
def no_record_checks(settings):
    """Re-verifications only where a test makes them."""
    settings.REVERIFY_NEW_RECORDS = False


def competition(hardware, problem, *, weight: int, running: bool = True) -> Competition:
    now = timezone.now()
    made = Competition.objects.create(
        slug=f"sprint-{weight}-{running}", title="Sprint", hardware=hardware,
        starts_at=now - timedelta(hours=2),
        ends_at=now + timedelta(days=1) if running else now - timedelta(hours=1),
        queue_weight=weight, published=True,
    )
    made.problems.set([problem])
    return made


def entries(contest: Competition, problem, user, count: int) -> list[Submission]:
    """`count` queued submissions of `user`, each entered in `contest`."""
    rows = queue(problem, contest.hardware, user, count)
    for row in rows:
        Entry.objects.create(competition=contest, submission=row, user=user, problem=problem)
    return rows


def shown_order(rows: list[Submission]) -> list[int]:
    """The rows' pks by the queue position each shows now."""
    return [pk for _, pk in sorted((queue_position(row), row.pk) for row in rows)]


def claim(times: int, harness, any_row: Submission) -> None:
    """Run `times` tasks; each claims the fair next row, whichever row it names."""
    for _ in range(times):
        harness.will_return()
        evaluate_submission(submission_id=any_row.pk, runner_name="r1")


def test_a_running_competitions_entries_take_its_weight_in_turns_per_round(
    cpu, problem, accounts, harness
):
    contest = competition(cpu, problem, weight=3)
    bob = queue(problem, cpu, accounts["bob"], 2)
    ada = entries(contest, problem, accounts["ada"], 6)
    shown = shown_order(bob + ada)
    claim(8, harness, bob[0])
    assert [owner(pk) for pk in claimed_order()] == ["bob", "ada", "ada", "ada"] * 2
    # The positions shown before were the order the runner took.
    assert claimed_order() == shown


def test_the_entrants_other_work_stays_in_their_accounts_lane(cpu, problem, accounts, harness):
    """Ada's entries wait in a lane of their own: her test runs still alternate with Bob's, and
    her entries neither wait behind them nor make them wait."""
    contest = competition(cpu, problem, weight=3)
    own = queue(problem, cpu, accounts["ada"], 2)
    bob = queue(problem, cpu, accounts["bob"], 2)
    entered = entries(contest, problem, accounts["ada"], 2)
    shown = shown_order(own + bob + entered)
    claim(6, harness, bob[0])
    assert claimed_order() == [own[0].pk, bob[0].pk, entered[0].pk, entered[1].pk,
                               own[1].pk, bob[1].pk]
    assert claimed_order() == shown


def test_after_the_competition_ends_its_entries_are_ordinary(cpu, problem, accounts, harness):
    contest = competition(cpu, problem, weight=3)
    bob = queue(problem, cpu, accounts["bob"], 4)
    ada = entries(contest, problem, accounts["ada"], 6)
    claim(4, harness, bob[0])
    contest.close_now()
    # Ada's turns in the competition are her account's now: she was served last, Bob goes next.
    assert shown_order(bob[1:] + ada[3:]) == [bob[1].pk, ada[3].pk, bob[2].pk, ada[4].pk,
                                             bob[3].pk, ada[5].pk]
    claim(6, harness, bob[0])
    assert [owner(pk) for pk in claimed_order()] == (
        ["bob", "ada", "ada", "ada"] + ["bob", "ada"] * 3)


def test_an_ended_or_weight_one_competition_changes_nothing(cpu, problem, accounts, harness):
    """Without a lane Ada's test runs and entries are one queue, oldest first, alternating with
    Bob's, whether her entries are of a competition of weight 1 or of an ended one."""
    even = competition(cpu, problem, weight=1)
    ended = competition(cpu, problem, weight=5, running=False)
    own = queue(problem, cpu, accounts["ada"], 2)
    bob = queue(problem, cpu, accounts["bob"], 4)
    entered = entries(even, problem, accounts["ada"], 1) + entries(
        ended, problem, accounts["ada"], 1)
    ada = own + entered
    expected = [row.pk for pair in zip(ada, bob, strict=True) for row in pair]
    assert shown_order(ada + bob) == expected
    assert {row.lane for row in fairness.waiting(fair_sources(cpu.pk))} == {None}
    claim(8, harness, bob[0])
    assert claimed_order() == expected


def test_a_re_verification_of_an_entry_takes_the_entrys_lane(cpu, problem, accounts, harness):
    """A would-be record of an entry is re-verified in the competition's lane: it has had one
    of its 3 turns, so it goes before Bob's later row, as it would not in Ada's own lane
    (tests/test_fair_share.py: test_a_reverification_takes_its_owners_turn)."""
    contest = competition(cpu, problem, weight=3)
    held = entries(contest, problem, accounts["ada"], 1)[0]
    claim(1, harness, held)
    reverification = Reverification.objects.create(
        submission=held, reason=Reverification.Reason.ADMIN,
        checked_evaluation=held.evaluations.get())
    bob = queue(problem, cpu, accounts["bob"])[0]
    order = [(row.source, row.pk) for row in fairness.ordered(fair_sources(cpu.pk))]
    assert order == [(1, reverification.pk), (0, bob.pk)]
    assert queue_position(bob) == 2
    contest.close_now()
    # Ended: the re-verification is Ada's, who was served; Bob, never served, goes first.
    assert queue_position(bob) == 1


def test_a_heavier_accounts_entries_keep_its_own_weight(cpu, problem, accounts, harness):
    """A lane's weight is its competition's or its account's, whichever is larger: entering a
    competition never slows an account an operator weighted."""
    AccountWeight.objects.create(user=accounts["ada"], weight=4, note="lab RL account")
    contest = competition(cpu, problem, weight=2)
    bob = queue(problem, cpu, accounts["bob"], 2)
    ada = entries(contest, problem, accounts["ada"], 8)
    assert [owner(pk) for pk in shown_order(bob + ada)] == ["bob"] + ["ada"] * 4 + ["bob"] + [
        "ada"] * 4
