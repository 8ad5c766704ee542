"""A submission's evaluations as its page shows them (issue 64): each labelled by what it was
(the first, the re-verification's second, a third), with its own figures, though a
re-verification's evaluation is stored with the timing its result ranks with; the page says
which figure ranks; and "took" runs from submission to the settled result, with the time spent
waiting in the queue apart (submissions.selectors.submission_evaluations, submission_took).

The runner's services run here with the stand-in harness (tests/conftest.py's `harness`:
reference 2.0 ms, so a kernel of `ms` has the speedup 2/ms).
"""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from evaluation.services import runner_heartbeat
from gpu_runner.services import evaluate_submission, reverify_submission
from submissions.models import Evaluation, Reverification, Submission
from submissions.selectors import (
    submission_evaluations,
    submission_status_payload,
    submission_took,
)
from submissions.services import submission_create
from tests.conftest import kernel_source

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(django_capture_on_commit_callbacks):
    def call(service, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return service(**kwargs)

    return call


@pytest.fixture
def record(user, cpu_hardware, relu_problem, harness, run) -> Submission:
    """A first result of 1.0 ms (2.0x) on an empty board: a would-be record, pending."""
    runner_heartbeat(name="r1", hardware=cpu_hardware, host="host", pid=1)
    runner_heartbeat(name="r2", hardware=cpu_hardware, host="host", pid=2)
    submission = submission_create(user=user, problem=relu_problem, backend="torch",
                                   source=kernel_source("relu_correct.py"), hardware=cpu_hardware)
    harness.will_return(ms=1.0)
    run(evaluate_submission, submission_id=submission.pk, runner_name="r1")
    return submission


def reverify(submission: Submission, run, *, runner: str) -> str:
    reverification = submission.reverifications.first()
    return run(reverify_submission, reverification_id=reverification.pk, runner_name=runner)


def three(record, harness, run, *, third_ms: float) -> Submission:
    """The second at 1.3 ms (1.54x, apart from the first), then a third of `third_ms`."""
    harness.will_return(ms=1.3)
    harness.will_return(ms=third_ms)
    assert reverify(record, run, runner="r2") == "undecided: a third evaluation is queued"
    reverify(record, run, runner="r1")
    record.refresh_from_db()
    return record


def page(submission: Submission, user) -> str:
    client = Client()
    client.force_login(user)
    return client.get(f"/submissions/{submission.pk}/").content.decode()


def test_three_evaluations_are_labelled_first_second_third_each_with_its_own_figures(
    record, harness, run, user
):
    # 2.0x, 1.54x, 1.74x: no two agree, it ranks with the second's figure. The third is
    # stored carrying that figure; shown, it is its own 1.15 ms.
    submission = three(record, harness, run, third_ms=1.15)
    third = submission.latest_evaluation
    assert third.candidate_median_ms == 1.3  # what it ranks with

    rows = submission_evaluations(submission)

    assert [(r["role"], r["label"]) for r in rows] == [
        ("first", "First evaluation"),
        ("second", "Re-verification (second evaluation)"),
        ("third", "Third evaluation"),
    ]
    assert [r["candidate_ms"] for r in rows] == [1.0, 1.3, 1.15]
    assert [round(r["speedup"], 3) for r in rows] == [2.0, 1.538, 1.739]
    assert [r["counts"] for r in rows] == [False, True, False]
    assert [r["evaluation"].pk for r in rows][-1] == third.pk
    # Each compared interval is shown beside its own figure.
    assert all(r["interval"]["low"] < r["speedup"] < r["interval"]["high"] for r in rows)

    html = page(submission, user)
    assert "Third evaluation: the result" in html
    assert "The figures it ranks with: the second evaluation&#x27;s, the slowest" in html
    # The third's details below carry the second's timing, and say so.
    assert 'id="timing-is-ranked-figure"' in html
    listed = html.split('id="evaluations"')[1].split("</table>")[0]
    assert listed.index("First evaluation") < listed.index("Re-verification (second") < (
        listed.index("Third evaluation"))
    third_row = listed.split('data-role="third"')[1].split("</tr>")[0]
    assert "1.15 ms" in third_row and "1.74×" in third_row and "ranks with" not in third_row


def test_a_third_that_agrees_with_the_first_ranks_with_the_firsts_figure_and_says_so(
    record, harness, run, user
):
    submission = three(record, harness, run, third_ms=0.99)  # 2.02x: with the first's 2.0x

    rows = submission_evaluations(submission)

    assert [r["counts"] for r in rows] == [True, False, False]
    assert rows[2]["candidate_ms"] == 0.99  # its own, not the first's 1.0 it carries
    assert submission_status_payload(submission)["evaluation"]["ranked_figure"] == (
        "The figures it ranks with: the first evaluation's, the slower of two that agree")
    listed = page(submission, user).split('id="evaluations"')[1].split("</table>")[0]
    assert "ranks with this figure" in listed.split('data-role="first"')[1].split("</tr>")[0]


def test_a_later_round_is_labelled_with_its_number_and_who_asked(record, harness, run, user):
    # All three of the first round disagree and it ranks; an admin asks again later.
    submission = three(record, harness, run, third_ms=1.15)
    Reverification.objects.create(
        submission=submission, reason=Reverification.Reason.ADMIN,
        checked_evaluation=submission.evaluations.get(purpose=Evaluation.Purpose.SUBMISSION))
    harness.will_return(ms=1.01)  # agrees with the first
    assert reverify(submission, run, runner="r2") == "passed"

    labels = [r["label"] for r in submission_evaluations(submission)]

    assert labels == [
        "First evaluation",
        "Re-verification (second evaluation) (re-verification 1, new record)",
        "Third evaluation (re-verification 1, new record)",
        "Re-verification (second evaluation) (re-verification 2, requested by an admin)",
    ]


def at(seconds: float):
    return BASE + timedelta(seconds=seconds)


BASE = timezone.now() - timedelta(hours=1)


def timed(submission: Submission, *, created: float, spans: list[tuple[float, float]],
          asked: list[float]) -> None:
    """Set when the submission was made, when each evaluation (in the order they ran) started
    and finished, and when each re-verification was asked for, in seconds from BASE."""
    Submission.objects.filter(pk=submission.pk).update(created_at=at(created))
    evaluations = list(submission.evaluations.order_by("finished_at", "id"))
    assert len(evaluations) == len(spans)
    # Latest first, so no two share a finish time on the way.
    for evaluation, (start, end) in reversed(list(zip(evaluations, spans, strict=True))):
        Evaluation.objects.filter(pk=evaluation.pk).update(started_at=at(start),
                                                           finished_at=at(end))
    for reverification, when in zip(submission.reverifications.order_by("created_at", "id"),
                                    asked, strict=True):
        Reverification.objects.filter(pk=reverification.pk).update(created_at=at(when))
    submission.refresh_from_db()


def test_took_runs_from_submission_to_the_settled_result_with_the_queue_wait_apart(
    record, harness, run, user
):
    submission = three(record, harness, run, third_ms=1.15)
    # Submitted at 0; the first waited 10 s and ran 4 s; its re-verification was asked for at
    # 14 and waited 30 s; the third was asked for when the second ended (48) and waited 12 s.
    timed(submission, created=0, spans=[(10, 14), (44, 48), (60, 64)], asked=[14])

    took = submission_took(submission, submission_evaluations(submission))

    assert (took["seconds"], took["queue_seconds"], took["evaluating_seconds"]) == (64, 52, 12)
    assert took["text"] == ("took 1 min 04 s from submission to settled result: 52 s waiting in "
                            "the queue, 12 s evaluating (3 evaluations)")
    assert submission_status_payload(submission)["took"]["text"] == took["text"]
    html = page(submission, user)
    assert f'<span id="elapsed" class="muted">{took["text"]}</span>' in html
    listed = html.split('id="evaluations"')[1].split("</table>")[0]
    third_row = listed.split('data-role="third"')[1].split("</tr>")[0]
    assert "<td>12 s</td>" in third_row and "<td>4.0 s</td>" in third_row


def test_nothing_is_said_to_have_taken_until_the_result_is_settled(record, harness, run, user):
    harness.will_return(ms=1.3)  # apart from the first: a third is to come
    reverify(record, run, runner="r2")
    record.refresh_from_db()
    assert record.status == Submission.Status.FINISHED and not record.is_settled

    assert submission_took(record, submission_evaluations(record)) is None
    assert submission_status_payload(record)["took"] is None
    assert '<span id="elapsed" class="muted"></span>' in page(record, user)


def test_a_result_settled_by_its_first_evaluation_took_its_wait_and_its_run(
    user, cpu_hardware, relu_problem, harness, run, settings
):
    settings.REVERIFY_NEW_RECORDS = False
    submission = submission_create(user=user, problem=relu_problem, backend="torch",
                                   source=kernel_source("relu_correct.py"), hardware=cpu_hardware)
    harness.will_return(ms=1.0)
    run(evaluate_submission, submission_id=submission.pk, runner_name="r1")
    timed(submission, created=0, spans=[(3, 21)], asked=[])

    [row] = submission_evaluations(submission)
    took = submission_took(submission, [row])

    assert (row["label"], row["counts"], row["queue_seconds"], row["seconds"]) == (
        "First evaluation", True, 3, 18)
    assert took["text"] == ("took 21 s from submission to settled result: 3.0 s waiting in the "
                            "queue, 18 s evaluating")
    html = page(submission, user)
    assert took["text"] in html and 'id="evaluations"' not in html  # one evaluation: no table
