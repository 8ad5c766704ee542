"""The people's ranking: per hardware and level, over each person's best verified results."""

import csv
import io

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from evaluation.services import hardware_register
from leaderboard import selectors
from leaderboard.services import board_refresh_for
from submissions.models import Submission
from submissions.runs.models import Model
from tests.leaderboard_factory import make_problem, make_result

pytestmark = pytest.mark.django_db


@pytest.fixture
def gpu(db):
    return hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")


@pytest.fixture
def people(db):
    make = get_user_model().objects.create_user
    return {name: make(username=name, password="a-long-passphrase-1") for name in "abcd"}


def test_people_rank_by_problems_solved_then_fast_ones_then_geomean(gpu, people):
    p1, p2, p3 = (make_problem(1, n) for n in (1, 2, 3))
    # a: two solved, one faster than the baseline. b: two solved, both faster. c: one, fastest.
    make_result(problem=p1, hardware=gpu, user=people["a"], ms=1.0, reference_ms=2.0)
    make_result(problem=p2, hardware=gpu, user=people["a"], ms=4.0, reference_ms=2.0)
    make_result(problem=p1, hardware=gpu, user=people["b"], ms=1.5, reference_ms=2.0)
    make_result(problem=p2, hardware=gpu, user=people["b"], ms=1.5, reference_ms=2.0)
    make_result(problem=p3, hardware=gpu, user=people["c"], ms=0.1, reference_ms=2.0)
    # d's only result is wrong: d is listed, last, with nothing solved.
    make_result(problem=p3, hardware=gpu, user=people["d"], verdict="incorrect", ms=1.0)
    # A model's results are in the models' table, not here.
    llm = Model.objects.create(litellm_name="openai/gpt-test", display_name="GPT Test")
    make_result(problem=p1, hardware=gpu, model=llm, ms=0.01)

    rows = selectors.people_table(hardware=gpu, level=1)
    assert [(r["rank"], r["user"], r["solved"], r["fast_1_count"]) for r in rows] == [
        (1, "b", 2, 2),
        (2, "a", 2, 1),
        (3, "c", 1, 1),
        (4, "d", 0, 0),
    ]
    assert rows[0]["problems"] == 3 and rows[0]["fast_p"]["1"] == pytest.approx(2 / 3)
    assert rows[2]["geomean_speedup"] == pytest.approx(20.0)


def test_a_result_waiting_for_reverification_does_not_count_until_it_passes(gpu, people):
    problem = make_problem(1, 1)
    held = make_result(problem=problem, hardware=gpu, user=people["a"], ms=1.0, refresh=False)
    Submission.objects.filter(pk=held.submission_id).update(
        reverification=Submission.ReverificationState.PENDING
    )
    board_refresh_for(held)
    assert [r["solved"] for r in selectors.people_table(hardware=gpu)] == [0]

    Submission.objects.filter(pk=held.submission_id).update(
        reverification=Submission.ReverificationState.PASSED
    )
    board_refresh_for(held)
    assert [r["solved"] for r in selectors.people_table(hardware=gpu)] == [1]


def test_the_page_lists_the_ranking_and_exports_it(client, gpu, people):
    problem = make_problem(1, 1)
    make_result(problem=problem, hardware=gpu, user=people["a"], ms=1.0)
    url = reverse("leaderboard_people")
    page = client.get(url, {"hardware": "h200", "level": 1}).content.decode()
    assert 'href="/leaderboard/users/a/"' in page
    [row] = list(csv.DictReader(io.StringIO(client.get(url, {"format": "csv"}).text)))
    assert (row["rank"], row["user"], row["solved"], row["fast_1_count"]) == ("1", "a", "1", "1")
    assert client.get(url, {"level": "x"}).status_code == 400
