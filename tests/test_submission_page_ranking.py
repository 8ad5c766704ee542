"""The submission page (submissions.views.submission_detail) says whether the result ranks and
what held, pending re-verification and ranked mean; once a re-verification replaced the first
evaluation, the first one stays on the page, labelled; a queued one shows its place and wait."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from evaluation.models import Runner
from evaluation.services import hardware_register
from submissions.models import Evaluation, Reverification, Submission
from tests.leaderboard_factory import make_problem, make_result

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user(username="ada", password="a-long-passphrase-1")


@pytest.fixture
def cpu(db):
    return hardware_register(slug="cpu", name="CPU", kind="cpu", backends=["torch"])


@pytest.fixture
def held(owner, cpu):
    """A new record, held off the board while its re-verification waits for a runner."""
    problem = make_problem(1, 1)
    first = make_result(problem=problem, hardware=cpu, user=owner, ms=1.0)
    Evaluation.objects.filter(pk=first.pk).update(runner_name="runner-one")
    submission = first.submission
    submission.mark_finished(verdict="correct")
    Reverification.objects.create(
        submission=submission, reason=Reverification.Reason.NEW_RECORD, checked_evaluation=first,
        avoid_runner="runner-one",
    )
    submission.hold_for_reverification()
    return submission


def page(submission: Submission, user=None) -> str:
    client = Client()
    if user is not None:
        client.force_login(user)
    response = client.get(f"/submissions/{submission.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_held_record_says_it_waits_for_its_reverification_and_what_that_means(held, owner):
    html = page(held, owner)
    assert 'data-state="pending" data-detail="pending_reverification"' in html
    assert "pending: re-verification" in html
    assert "It would set a new record, so it is off the board until a second evaluation" in html
    assert "pending (queued)" in html
    terms = html.split('id="ranking-terms"')[1].split("</details>")[0]
    for term in ("ranked", "pending: re-verification", "re-verified (passed)",
                 "timing not reproduced (a note)", "held: timing not confirmed",
                 "off the board: re-verification failed"):
        assert f"<dt>{term}</dt>" in terms
    assert 'id="first-evaluation"' not in html  # one evaluation so far


def test_after_a_passed_reverification_it_ranks_and_the_first_evaluation_stays_labelled(
    held, owner, cpu
):
    reverification = held.reverifications.get()
    second = make_result(problem=held.problem, hardware=cpu, submission=held, ms=1.1,
                         purpose=Evaluation.Purpose.REVERIFY)
    Evaluation.objects.filter(pk=second.pk).update(runner_name="runner-two")
    Reverification.objects.filter(pk=reverification.pk).update(
        status=Reverification.Status.PASSED, evaluation=second
    )
    Submission.objects.filter(pk=held.pk).update(
        reverification=Submission.ReverificationState.PASSED
    )

    html = page(held, owner)

    assert 'data-state="ranked"' in html and "Rank 1 on level1/1_P1 on cpu." in html
    assert "<strong>passed</strong>" in html
    # The evaluation below is the re-verification's, and says so; each is listed with its own
    # figures, and the one the result ranks with is marked.
    latest, first = html.split('id="first-evaluation"')
    assert f'data-evaluation-id="{second.pk}"' in latest
    assert "Re-verification (second evaluation): the result" in latest
    listed = latest.split('id="evaluations"')[1].split("</table>")[0]
    assert listed.count("<tr data-role=") == 2
    assert f'data-role="second" data-evaluation="{second.pk}" class="counts"' in listed
    assert "ranks with this figure" in listed
    assert "by runner runner-two" in latest
    assert "First evaluation: the result the re-verification checked" in first
    assert f'data-evaluation-id="{reverification.checked_evaluation_id}"' in first
    assert "by runner runner-one" in first
    assert first.count('id="ranking"') == 0  # said once, for the result that counts


def test_an_incorrect_result_says_why_it_does_not_rank(owner, cpu):
    evaluation = make_result(problem=make_problem(1, 2), hardware=cpu, user=owner,
                             verdict="incorrect", ms=3.0)
    evaluation.submission.mark_finished(verdict="incorrect")
    html = page(evaluation.submission)
    assert 'data-state="off_board" data-detail="not_correct"' in html
    assert "off the board: not correct" in html
    assert "only correct results rank" in html


def test_a_queued_submission_shows_its_place_and_about_how_long_until_its_result(owner, cpu):
    problem = make_problem(1, 3)
    for _ in range(2):
        done = make_result(problem=problem, hardware=cpu, user=owner)
        Evaluation.objects.filter(pk=done.pk).update(
            started_at=done.finished_at - timedelta(seconds=12)
        )
    Runner.objects.create(name="r1", hardware=cpu, last_seen=timezone.now())
    waiting = []
    for _ in range(2):
        submission = make_result(problem=problem, hardware=cpu, user=owner).submission
        Submission.objects.filter(pk=submission.pk).update(status=Submission.Status.QUEUED)
        Evaluation.objects.filter(submission=submission).delete()
        waiting.append(submission)

    html = page(waiting[1], owner)

    assert "(position 2 in the queue, result in about 24 s)" in html
    assert 'id="ranking"' not in html  # nothing to rank yet
