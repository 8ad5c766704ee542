"""Re-verification by a third evaluation, and owners asking for another attempt.

A would-be record whose second evaluation's speedup disagrees with the first's is not decided on
two: a third evaluation with fresh seeds decides how fast it is (evaluation/stats.settle). It
ranks on the slower of the two that agree; when no two of the three agree it ranks on the
slowest of them, with the note "timing not reproduced": never held for it. The owner of a result
held on its timing (the judge's clock confirmed none of it; or held as "timing not reproduced"
before that rule) may ask for another attempt, within QUOTA_REVERIFICATIONS_PER_DAY. The
runner's services run in this process with the sandboxed child replaced by the stand-in harness
(tests/conftest.py's `harness`, a FakeHarness: reference 2.0 ms, so a kernel of `ms` has the
speedup 2/ms, each within about 2%).
"""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from evaluation import stats
from evaluation.services import runner_heartbeat
from gpu_runner.services import evaluate_submission, reverify_submission
from leaderboard.models import Record
from leaderboard.selectors import board_rows, flagged_rows
from leaderboard.services import board_refresh_for
from submissions.models import Evaluation, Reverification, Submission
from submissions.services import submission_create
from tests.api_support import SchemaCheckedClient, token_for
from tests.conftest import kernel_source
from tests.leaderboard_factory import make_result

pytestmark = pytest.mark.django_db

PENDING = Submission.ReverificationState.PENDING


@pytest.fixture
def run(django_capture_on_commit_callbacks):
    """Call a runner's service, then what it left for after the commit (enqueues, events)."""

    def call(service, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return service(**kwargs)

    return call


@pytest.fixture
def record(user, cpu_hardware, relu_problem, harness, run) -> Submission:
    """A first result of 1.0 ms (2.0x) on an empty board, by r1 while r2 is live: held pending."""
    runner_heartbeat(name="r1", hardware=cpu_hardware, host="host", pid=1)
    runner_heartbeat(name="r2", hardware=cpu_hardware, host="host", pid=2)
    submission = submission_create(user=user, problem=relu_problem, backend="torch",
                                   source=kernel_source("relu_correct.py"), hardware=cpu_hardware)
    harness.will_return(ms=1.0)
    assert run(evaluate_submission, submission_id=submission.pk, runner_name="r1") == "correct"
    submission.refresh_from_db()
    assert submission.reverification == PENDING
    return submission


def reverify(submission: Submission, run, *, runner: str) -> str:
    reverification = submission.reverifications.first()
    return run(reverify_submission, reverification_id=reverification.pk, runner_name=runner)


@pytest.fixture
def disputed(record, harness, run) -> Submission:
    """The second evaluation, by r2, at 1.3 ms (1.54x): apart from the first's 2.0x."""
    harness.will_return(ms=1.3)
    assert reverify(record, run, runner="r2") == "undecided: a third evaluation is queued"
    return record


@pytest.fixture
def apart(disputed, harness, run) -> Submission:
    """A third evaluation, by r1, at 1.15 ms (1.74x): apart from both."""
    harness.will_return(ms=1.15)
    assert reverify(disputed, run, runner="r1") == "passed"
    disputed.refresh_from_db()
    return disputed


@pytest.fixture
def held(apart) -> Submission:
    """The same three evaluations as a result held "timing not reproduced" before such results
    ranked at their slowest: the third stored with its own timing, the re-verification failed."""
    reverification = apart.reverifications.get()
    third = reverification.evaluation
    own = third.static_report["checks"]["reverification"]["third_timing"]
    Evaluation.objects.filter(pk=third.pk).update(**own)
    Reverification.objects.filter(pk=reverification.pk).update(
        status=Reverification.Status.FAILED,
        message="Timing not reproduced: no two of the 3 evaluations' speedups agree. It is "
                "held off the board as measurement noise, not as an exploit.")
    Submission.objects.filter(pk=apart.pk).update(
        reverification=Submission.ReverificationState.FAILED)
    board_refresh_for(third)
    apart.refresh_from_db()
    return apart


@pytest.fixture
def unconfirmed(user, cpu_hardware, relu_problem, harness, run) -> Submission:
    """A first result whose timing the judge's clock did not confirm, and no record (bob's
    0.5 ms is faster): held off the board on its timing, no re-verification queued."""
    bob = get_user_model().objects.create_user(username="bob", password="b-long-passphrase-2")
    make_result(problem=relu_problem, hardware=cpu_hardware, user=bob, ms=0.5)
    runner_heartbeat(name="r1", hardware=cpu_hardware, host="host", pid=1)
    runner_heartbeat(name="r2", hardware=cpu_hardware, host="host", pid=2)
    submission = submission_create(user=user, problem=relu_problem, backend="torch",
                                   source=kernel_source("relu_correct.py"), hardware=cpu_hardware)
    harness.will_return(ms=1.0, flags=["timing_unconfirmed"])
    run(evaluate_submission, submission_id=submission.pk, runner_name="r1")
    assert not Reverification.objects.exists()
    return submission


def api(user) -> SchemaCheckedClient:
    return SchemaCheckedClient().with_token(token_for(user))


def test_the_rule_settles_two_agreeing_and_breaks_a_disagreement_with_a_third():
    def iv(value):
        return stats.Interval(value, value * 0.98, value * 1.02)

    assert stats.settle([iv(2.0), iv(1.98)]) == stats.Settlement("agree", (0, 1), 1)
    assert stats.settle([iv(2.0), iv(1.5)]).outcome == "third"
    assert stats.settle([iv(2.0), iv(1.5), iv(1.51)]) == stats.Settlement("agree", (1, 2), 1)
    assert stats.settle([iv(2.0), iv(1.5), iv(2.01)]) == stats.Settlement("agree", (0, 2), 0)
    # None agree: it ranks on the slowest of all, whichever evaluation that was.
    assert stats.settle([iv(2.0), iv(1.5), iv(1.75)]) == stats.Settlement("apart", None, 1)
    assert stats.settle([iv(1.5), iv(2.0), iv(1.75)]).ranked_on == 0
    # One timing set aside (the judge's clock did not confirm it): what is left decides.
    assert stats.settle([iv(2.0)]).outcome == "third"
    assert stats.settle([iv(2.0), iv(1.5)], last=True) == stats.Settlement("apart", None, 1)
    assert stats.settle([iv(2.0)], last=True) == stats.Settlement("apart", None, 0)
    # Medians: the slower is the longer time.
    assert stats.settle([iv(1.0), iv(1.01)], higher_is_faster=False).ranked_on == 1


def test_a_second_evaluation_that_disagrees_queues_a_third_and_the_result_stays_pending(
    disputed, user, cpu_hardware, relu_problem, harness
):
    reverification = disputed.reverifications.get()
    second = reverification.evaluation
    assert reverification.status == Reverification.Status.QUEUED
    assert reverification.is_third_round and reverification.disputed_evaluation == second
    assert reverification.enqueued_at is not None  # its task went to the queue after commit
    # The second is kept as measured, with no note: nothing is decided yet.
    assert second.flags == [] and second.candidate_median_ms == 1.3
    comparison = second.static_report["checks"]["reverification"]
    assert (comparison["outcome"], comparison["compared"], comparison["note"]) == (
        "third", "speedup", None)
    disputed.refresh_from_db()
    assert disputed.reverification == PENDING and not disputed.is_settled
    assert board_rows(problem=relu_problem, hardware=cpu_hardware) == []

    body = api(user).get(f"/api/v1/submissions/{disputed.pk}/").json()
    assert (body["status"], body["ranking"]["state"], body["settled"]) == (
        "finished", "pending", False)
    assert "a third evaluation with fresh secret seeds decides" in body["ranking"]["reason"]
    # The third goes to another runner than the second's while one is live.
    assert not reverification.claim(runner_name="r2", lease_seconds=60)
    assert reverification.claim(runner_name="r1", lease_seconds=60)


def test_a_third_evaluation_that_agrees_with_the_second_ranks_on_the_slower_of_those_two(
    disputed, user, cpu_hardware, relu_problem, harness, run
):
    harness.will_return(ms=1.31)  # 1.53x, within the second's 1.54x

    assert reverify(disputed, run, runner="r1") == "passed"

    reverification = disputed.reverifications.get()
    third = reverification.evaluation
    assert third.purpose == Evaluation.Purpose.REVERIFY and third.attempt == 2
    assert len({job["seed"] for job in harness.jobs}) == 3  # fresh seeds every time
    comparison = third.static_report["checks"]["reverification"]
    assert comparison["agreeing"] == ["second", "third"] and comparison["ranked_on"] == "third"
    assert third.flags == [] and third.candidate_median_ms == 1.31
    [row] = board_rows(problem=relu_problem, hardware=cpu_hardware)
    assert (row["rank"], row["candidate_ms"], row["evaluation_id"]) == (1, 1.31, third.pk)
    assert Record.objects.get().evaluation_id == third.pk
    body = api(user).get(f"/api/v1/submissions/{disputed.pk}/").json()
    assert (body["ranking"]["state"], body["ranking"]["rank"], body["settled"]) == (
        "ranked", 1, True)


def test_a_third_evaluation_that_agrees_with_the_first_ranks_on_the_first_timing(
    disputed, cpu_hardware, relu_problem, harness, run
):
    harness.will_return(ms=0.99)  # 2.02x: with the first's 2.0x, which is the slower

    assert reverify(disputed, run, runner="r1") == "passed"

    third = disputed.reverifications.get().evaluation
    comparison = third.static_report["checks"]["reverification"]
    assert comparison["agreeing"] == ["first", "third"] and comparison["ranked_on"] == "first"
    assert comparison["third_timing"]["candidate_median_ms"] == 0.99  # its own, kept
    assert (third.candidate_median_ms, third.speedup) == (1.0, 2.0)
    [row] = board_rows(problem=relu_problem, hardware=cpu_hardware)
    assert row["candidate_ms"] == 1.0


def test_three_evaluations_that_all_disagree_rank_at_the_slowest_with_a_note_never_an_exploit(
    apart, user, cpu_hardware, relu_problem
):
    # 2.0x, 1.54x, 1.74x: no two agree. It ranks at 1.54x, the second's, however fast the
    # first was: a timing that was fast once gains nothing.
    reverification = apart.reverifications.get()
    third = reverification.evaluation
    assert reverification.status == Reverification.Status.PASSED and not reverification.held
    assert third.flags == [Reverification.TIMING_NOTE]
    comparison = third.static_report["checks"]["reverification"]
    assert (comparison["outcome"], comparison["ranked_on"]) == ("apart", "second")
    assert (third.candidate_median_ms, comparison["third_timing"]["candidate_median_ms"]) == (
        1.3, 1.15)
    assert reverification.message.startswith(
        "Timing not reproduced: no two of the 3 evaluations' speedups agree (the third "
        "evaluation's 1.739x")
    assert "It ranks at the slowest, the second evaluation's 1.538x" in reverification.message
    assert apart.reverification == Submission.ReverificationState.PASSED and apart.is_settled
    [row] = board_rows(problem=relu_problem, hardware=cpu_hardware)
    assert (row["rank"], row["candidate_ms"], row["evaluation_id"]) == (1, 1.3, third.pk)
    assert flagged_rows(problem=relu_problem, hardware=cpu_hardware) == []
    assert Record.objects.get().evaluation_id == third.pk
    body = api(user).get(f"/api/v1/submissions/{apart.pk}/").json()
    assert (body["ranking"]["state"], body["ranking"]["rank"], body["settled"]) == (
        "ranked", 1, True)
    assert "It ranks at the slowest, the second evaluation's" in body["ranking"]["reason"]
    assert body["speedup"] == pytest.approx(2 / 1.3)

    client = Client()
    client.force_login(user)
    html = client.get(f"/submissions/{apart.pk}/").content.decode()
    assert 'data-agrees="no"' in html and "no two overlap" in html
    assert "it ranks on the slowest, the second evaluation's timing" in html
    assert "third evaluation: <span" in html
    # Nothing to ask for: another attempt could only swap the slow figure for a luckier one.
    assert 'id="reverify-form"' not in html
    refused = api(user).post(f"/api/v1/submissions/{apart.pk}/reverify/")
    assert (refused.status_code, refused.json()["code"]) == (409, "not_held")


def test_a_result_held_as_not_reproduced_before_the_rule_stays_held_until_its_owner_asks(
    held, user, cpu_hardware, relu_problem
):
    reverification = held.reverifications.get()
    assert reverification.status == Reverification.Status.FAILED and reverification.held
    assert board_rows(problem=relu_problem, hardware=cpu_hardware) == []
    body = api(user).get(f"/api/v1/submissions/{held.pk}/").json()
    assert (body["ranking"]["state"], body["ranking"]["detail"], body["settled"]) == (
        "held", "timing_not_reproduced", True)
    client = Client()
    client.force_login(user)
    html = client.get(f"/submissions/{held.pk}/").content.decode()
    assert "<strong>held: timing not reproduced</strong>" in html
    assert 'id="reverify-form"' in html  # the owner may ask for another attempt


def test_the_owner_asks_again_for_a_held_result_and_it_ranks_when_it_agrees(
    held, user, cpu_hardware, relu_problem, harness, run, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = api(user).post(f"/api/v1/submissions/{held.pk}/reverify/")
    assert response.status_code == 202, response.content
    body = response.json()
    assert (body["reason"], body["status"], body["third_evaluation"]) == ("owner", "queued", False)
    again = Reverification.objects.get(pk=body["id"])
    assert again.requested_by == user and again.enqueued_at is not None
    held.refresh_from_db()
    assert held.reverification == PENDING
    waiting = api(user).get(f"/api/v1/submissions/{held.pk}/").json()
    assert (waiting["ranking"]["state"], waiting["settled"]) == ("pending", False)
    assert "Its owner asked for another re-verification" in waiting["ranking"]["reason"]

    harness.will_return(ms=1.01)  # agrees with the first evaluation's 2.0x
    assert reverify(held, run, runner="r2") == "passed"

    [row] = board_rows(problem=relu_problem, hardware=cpu_hardware)
    assert (row["rank"], row["candidate_ms"]) == (1, 1.01)
    ranking = api(user).get(f"/api/v1/submissions/{held.pk}/").json()["ranking"]
    assert ranking["state"] == "ranked"


def test_owner_reverifications_stop_at_the_daily_quota_and_staff_are_exempt(
    unconfirmed, user, harness, run, settings
):
    settings.QUOTA_REVERIFICATIONS_PER_DAY = 1
    assert api(user).post(f"/api/v1/submissions/{unconfirmed.pk}/reverify/").status_code == 202
    open_again = api(user).post(f"/api/v1/submissions/{unconfirmed.pk}/reverify/")
    assert (open_again.status_code, open_again.json()["code"]) == (409, "already_open")
    # The judge's clock confirms none of the next two either: nothing to rank at, held again.
    harness.will_return(ms=1.0, flags=["timing_unconfirmed"])
    harness.will_return(ms=1.0, flags=["timing_unconfirmed"])
    assert reverify(unconfirmed, run, runner="r2") == "undecided: a third evaluation is queued"
    assert reverify(unconfirmed, run, runner="r1") == "failed"
    again = unconfirmed.reverifications.first()
    assert again.held and again.message.startswith("Timing not confirmed")
    ranking = api(user).get(f"/api/v1/submissions/{unconfirmed.pk}/").json()["ranking"]
    assert (ranking["state"], ranking["detail"]) == ("held", "timing_unconfirmed")

    over = api(user).post(f"/api/v1/submissions/{unconfirmed.pk}/reverify/")
    assert over.status_code == 429 and over.json()["code"] == "quota_reverifications"
    assert int(over.headers["Retry-After"]) > 0

    admin = get_user_model().objects.create_user(username="root", password="r-long-pass-3",
                                                 is_staff=True)
    assert api(admin).post(f"/api/v1/submissions/{unconfirmed.pk}/reverify/").status_code == 202


def test_only_the_owner_and_only_a_held_result_can_be_reverified_on_request(
    held, user, cpu_hardware, relu_problem
):
    ranked = make_result(problem=relu_problem, hardware=cpu_hardware, user=user, ms=3.0)
    refused = api(user).post(f"/api/v1/submissions/{ranked.submission_id}/reverify/")
    assert (refused.status_code, refused.json()["code"]) == (409, "not_held")

    bob = get_user_model().objects.create_user(username="bob", password="b-long-passphrase-2")
    assert api(bob).post(f"/api/v1/submissions/{held.pk}/reverify/").status_code == 404
    client = Client()
    client.force_login(bob)
    assert 'id="reverify-form"' not in client.get(f"/submissions/{held.pk}/").content.decode()
    assert client.post(f"/submissions/{held.pk}/reverify/").status_code == 403
    assert not Reverification.objects.filter(reason=Reverification.Reason.OWNER).exists()


def test_the_button_on_the_submission_page_queues_another_attempt(held, user):
    client = Client()
    client.force_login(user)

    response = client.post(f"/submissions/{held.pk}/reverify/", follow=True)

    assert "Re-verification queued" in response.content.decode()
    again = held.reverifications.first()
    assert (again.reason, again.status) == ("owner", "queued")
    held.refresh_from_db()
    assert held.reverification == PENDING


def test_a_second_evaluation_whose_timing_the_judge_did_not_confirm_calls_a_third(
    record, cpu_hardware, relu_problem, harness, run
):
    # A loaded host: the judge's clock did not confirm the second's times (a note, not an
    # exploit). Its timing is set aside, and a third evaluation decides with the first.
    harness.will_return(ms=1.0, flags=["timing_unconfirmed"])
    assert reverify(record, run, runner="r2") == "undecided: a third evaluation is queued"
    record.refresh_from_db()
    assert record.reverification == PENDING and not record.is_settled

    harness.will_return(ms=1.01)
    assert reverify(record, run, runner="r1") == "passed"

    third = record.reverifications.get().evaluation
    comparison = third.static_report["checks"]["reverification"]
    assert (comparison["roles"], comparison["set_aside"]) == (["first", "third"], ["second"])
    assert comparison["ranked_on"] == "third"
    [row] = board_rows(problem=relu_problem, hardware=cpu_hardware)
    assert row["candidate_ms"] == 1.01


def test_a_would_be_record_whose_timing_was_not_confirmed_is_evaluated_again_at_once(
    user, cpu_hardware, relu_problem, harness, run
):
    runner_heartbeat(name="r1", hardware=cpu_hardware, host="host", pid=1)
    submission = submission_create(user=user, problem=relu_problem, backend="torch",
                                   source=kernel_source("relu_correct.py"), hardware=cpu_hardware)
    harness.will_return(ms=1.0, flags=["timing_unconfirmed"])
    run(evaluate_submission, submission_id=submission.pk, runner_name="r1")

    # A record with the timing it reported: held pending, not left for its owner to notice.
    reverification = submission.reverifications.get()
    assert reverification.reason == Reverification.Reason.NEW_RECORD
    submission.refresh_from_db()
    assert submission.reverification == PENDING
    assert api(user).get(f"/api/v1/submissions/{submission.pk}/").json()["ranking"][
        "state"] == "pending"
    # Its own timing is set aside: two new evaluations must agree.
    harness.will_return(ms=1.0)
    harness.will_return(ms=1.01)
    assert reverify(submission, run, runner="r2") == "undecided: a third evaluation is queued"
    assert reverify(submission, run, runner="r1") == "passed"
    [row] = board_rows(problem=relu_problem, hardware=cpu_hardware)
    assert (row["rank"], row["candidate_ms"]) == (1, 1.01)


def test_the_owner_asks_again_for_a_first_result_whose_timing_was_not_confirmed(
    user, cpu_hardware, relu_problem, harness, run, django_capture_on_commit_callbacks
):
    bob = get_user_model().objects.create_user(username="bob", password="b-long-passphrase-2")
    make_result(problem=relu_problem, hardware=cpu_hardware, user=bob, ms=0.5)
    runner_heartbeat(name="r1", hardware=cpu_hardware, host="host", pid=1)
    submission = submission_create(user=user, problem=relu_problem, backend="torch",
                                   source=kernel_source("relu_correct.py"), hardware=cpu_hardware)
    harness.will_return(ms=1.0, flags=["timing_unconfirmed"])
    run(evaluate_submission, submission_id=submission.pk, runner_name="r1")
    assert not Reverification.objects.exists()  # no record: kept off the board, as noted
    assert [r["participant"] for r in board_rows(problem=relu_problem,
                                                 hardware=cpu_hardware)] == ["bob"]
    ranking = api(user).get(f"/api/v1/submissions/{submission.pk}/").json()["ranking"]
    assert (ranking["state"], ranking["detail"]) == ("held", "timing_unconfirmed")
    assert "ask for another attempt" in ranking["reason"]

    with django_capture_on_commit_callbacks(execute=True):
        asked = api(user).post(f"/api/v1/submissions/{submission.pk}/reverify/")
    assert asked.status_code == 202, asked.content
    # The first timing does not count: two new evaluations must agree before it ranks.
    harness.will_return(ms=1.0)
    harness.will_return(ms=1.02)
    assert reverify(submission, run, runner="r2") == "undecided: a third evaluation is queued"
    assert reverify(submission, run, runner="r1") == "passed"

    rows = board_rows(problem=relu_problem, hardware=cpu_hardware)
    assert [(r["participant"], r["candidate_ms"]) for r in rows] == [("bob", 0.5), ("ada", 1.02)]
