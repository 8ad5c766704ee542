"""GET /api/v1/submissions/ID/ says whether its result ranks, its rank on the board, and why
not: the same answer as the board (leaderboard BestEntry) by the one rule of
evaluation/scoring.py."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from evaluator import flags
from leaderboard.models import BestEntry
from leaderboard.selectors import board_rows
from leaderboard.services import board_refresh_for
from submissions.models import Evaluation, Reverification, Submission
from submissions.reverifications import reverification_request
from submissions.services import submission_create
from tests.api_support import SchemaCheckedClient, token_for
from tests.conftest import kernel_source
from tests.leaderboard_factory import make_result

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(user):
    return SchemaCheckedClient().with_token(token_for(user))


@pytest.fixture
def people(db):
    users = get_user_model().objects
    return [users.create_user(username=name, password="a-long-passphrase-1")
            for name in ("bob", "carl")]


def ranking(api, submission: Submission) -> dict:
    response = api.get(f"/api/v1/submissions/{submission.pk}/")
    assert response.status_code == 200, response.content
    return response.json()["ranking"]


def board_rank(submission: Submission) -> int | None:
    entry = BestEntry.objects.filter(submission=submission).first()
    return entry.rank if entry else None


def second_evaluation(submission: Submission, *, verdict: str, ms: float) -> Reverification:
    """Re-verify a held result the way a runner does: claim it, store the second evaluation,
    finish it, refresh the board."""
    reverification = submission.reverifications.get(status=Reverification.Status.QUEUED)
    assert reverification.claim(runner_name="r2", lease_seconds=60)
    evaluation = make_result(
        problem=submission.problem, hardware=submission.hardware, submission=submission,
        verdict=verdict, ms=ms, purpose=Evaluation.Purpose.REVERIFY, refresh=False,
    )
    assert reverification.finish(evaluation=evaluation, runner_name="r2")
    board_refresh_for(evaluation)
    return reverification


def test_a_queued_submission_is_not_evaluated_yet(api, user, cpu_hardware, relu_problem):
    submission = submission_create(user=user, problem=relu_problem, backend="torch",
                                   hardware=cpu_hardware, source=kernel_source("relu_correct.py"))
    assert ranking(api, submission) == {
        "state": "pending", "detail": "not_evaluated", "rank": None,
        "reason": "It has no result yet.",
    }


def test_a_ranked_result_gives_its_rank_on_the_board(
    api, user, people, cpu_hardware, relu_problem
):
    bob, carl = people
    make_result(problem=relu_problem, hardware=cpu_hardware, user=bob, ms=1.0)
    mine = make_result(problem=relu_problem, hardware=cpu_hardware, user=user, ms=2.0).submission
    make_result(problem=relu_problem, hardware=cpu_hardware, user=carl, ms=3.0)
    state = ranking(api, mine)
    assert state["state"] == "ranked" and state["rank"] == 2 == board_rank(mine)
    assert "Rank 2 on level1/901_Small_ReLU on cpu" in state["reason"]


def test_a_capped_result_ranks_where_the_board_puts_it(
    api, client, user, people, cpu_hardware, relu_problem
):
    """A small own-kernel share (backend_share_small) ranks no faster than the reference timed
    beside it: 0.5 ms measured against a 2.0 ms reference ranks as 2.0 ms, behind bob's 1.0."""
    bob, carl = people
    theirs = make_result(problem=relu_problem, hardware=cpu_hardware, user=bob, ms=1.0)
    capped = {"reference_ms": 2.0, "flags": (flags.BACKEND_SHARE_SMALL,)}
    mine = make_result(problem=relu_problem, hardware=cpu_hardware, user=user, ms=0.5,
                       **capped).submission
    later = make_result(problem=relu_problem, hardware=cpu_hardware, user=carl, ms=0.4,
                        **capped).submission
    assert [row["submission_id"] for row in board_rows(
        problem=relu_problem, hardware=cpu_hardware
    )] == [theirs.submission_id, mine.pk, later.pk]
    for submission, rank in [(theirs.submission, 1), (mine, 2), (later, 3)]:
        state = ranking(api, submission)
        assert (state["state"], state["rank"]) == ("ranked", rank) == ("ranked",
                                                                       board_rank(submission))
    page = client.get(reverse("submission_detail", args=[mine.pk])).content.decode()
    assert "Rank 2 on level1/901_Small_ReLU on cpu" in page


def test_every_rank_matches_the_board_with_ties_and_several_results_each(
    api, user, people, cpu_hardware, relu_problem
):
    bob, carl = people
    results = [
        make_result(problem=relu_problem, hardware=cpu_hardware, user=who, ms=ms).submission
        for who, ms in [(bob, 2.0), (user, 2.0), (carl, 1.5), (user, 4.0), (bob, 1.0),
                        (carl, 9.0)]
    ]
    make_result(problem=relu_problem, hardware=cpu_hardware, user=user, verdict="incorrect")
    for submission in results:
        state = ranking(api, submission)
        assert state["state"] == "ranked"
        assert state["rank"] == board_rank(submission), submission.pk
    # ada's 2.0 tied bob's first 2.0 but came later; bob's 1.0 and carl's 1.5 are ahead.
    assert ranking(api, results[1])["rank"] == 3


def test_a_slower_result_of_the_same_participant_ranks_without_a_place_of_its_own(
    api, user, cpu_hardware, relu_problem
):
    fast = make_result(problem=relu_problem, hardware=cpu_hardware, user=user, ms=1.0)
    slow = make_result(problem=relu_problem, hardware=cpu_hardware, user=user, ms=2.0)
    state = ranking(api, slow.submission)
    assert state["state"] == "ranked" and state["rank"] is None
    assert f"submission {fast.submission_id}" in state["reason"]
    assert ranking(api, fast.submission)["rank"] == 1


def test_a_would_be_record_is_pending_reverification_until_it_passes(
    api, user, cpu_hardware, relu_problem
):
    submission = make_result(problem=relu_problem, hardware=cpu_hardware, user=user).submission
    reverification_request(submission=submission, reason=Reverification.Reason.NEW_RECORD)
    board_refresh_for(submission.latest_evaluation)
    state = ranking(api, submission)
    assert state["state"] == "pending" and state["rank"] is None
    assert state["detail"] == "pending_reverification"
    assert "fresh secret seeds" in state["reason"]
    assert board_rank(submission) is None  # the board agrees: not ranked yet

    second_evaluation(submission, verdict="correct", ms=1.1)
    state = ranking(api, submission)
    assert state == {**state, "state": "ranked", "rank": 1}
    assert board_rank(submission) == 1


def test_a_failed_reverification_says_why(api, user, cpu_hardware, relu_problem):
    submission = make_result(problem=relu_problem, hardware=cpu_hardware, user=user).submission
    reverification_request(submission=submission, reason=Reverification.Reason.NEW_RECORD)
    reverification = second_evaluation(submission, verdict="incorrect", ms=1.0)
    state = ranking(api, submission)
    assert state["state"] == "off_board" and state["rank"] is None
    assert state["detail"] == "failed_reverification"
    assert reverification.message and reverification.message in state["reason"]
    assert board_rank(submission) is None


def test_a_flagged_result_does_not_rank(api, user, cpu_hardware, relu_problem):
    submission = make_result(problem=relu_problem, hardware=cpu_hardware, user=user,
                             flags=("faster_than_light",)).submission
    state = ranking(api, submission)
    assert state["state"] == "off_board" and state["rank"] is None
    assert state["detail"] == "flagged"
    assert "faster_than_light" in state["reason"]


def test_an_incorrect_result_does_not_rank_and_gives_its_verdict(
    api, user, cpu_hardware, relu_problem
):
    submission = make_result(problem=relu_problem, hardware=cpu_hardware, user=user,
                             verdict="compile_error").submission
    state = ranking(api, submission)
    assert state["state"] == "off_board" and state["rank"] is None
    assert state["detail"] == "not_correct"
    assert "compile_error" in state["reason"]


def test_another_users_submission_shows_its_ranking_too(
    user, people, cpu_hardware, relu_problem
):
    bob, _ = people
    theirs = make_result(problem=relu_problem, hardware=cpu_hardware, user=bob).submission
    api = SchemaCheckedClient().with_token(token_for(user))
    assert ranking(api, theirs)["rank"] == 1


def test_the_schema_documents_the_ranking_and_the_urls():
    from tests.api_support import openapi_schema

    components = openapi_schema()["components"]["schemas"]
    submission = components["Submission"]["properties"]
    assert "ranking" in submission and "urls" in submission
    assert set(components["Ranking"]["properties"]) == {"state", "detail", "rank", "reason"}
    assert "events_url" in components["SubmissionUrls"]["properties"]
