"""Boards rank with the noise shown: each time with its 95% interval from the timing samples
(evaluation/stats.py), and an entry whose interval overlaps the one above shown as a tie (the
same shown rank, a "tie" label), on the page, in the board API, the CSV/JSON exports and the
live board events. The strict order (`rank`) stays as it was."""

import csv
import io

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from evaluation import stats
from kbsite.models import LiveEvent
from leaderboard.selectors import board_rows
from submissions.models import Evaluation
from tests.api_support import SchemaCheckedClient, token_for
from tests.leaderboard_factory import make_result

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    users = get_user_model().objects
    return {name: users.create_user(username=name, password="a-long-passphrase-1")
            for name in ("amy", "ben", "cat", "dan")}


def result(problem, hardware, user, *, ms: float, mad_ms: float, n: int = 100):
    evaluation = make_result(problem=problem, hardware=hardware, user=user, ms=ms)
    Evaluation.objects.filter(pk=evaluation.pk).update(candidate_stats={
        "median_ms": ms, "mad_ms": mad_ms, "mean_ms": ms, "std_ms": 1.4826 * mad_ms,
        "min_ms": ms * 0.9, "max_ms": ms * 1.5, "n": n,
    })
    return evaluation


@pytest.fixture
def board(people, cpu_hardware, relu_problem, settings):
    """amy 1.00 and ben 1.01 ms (tight samples: apart by less than the floor): a tie; cat 1.50
    (tight): alone; dan 1.70 ms with widely spread samples reaching down to cat's: a tie."""
    settings.TIMING_INTERVAL_FLOOR = 0.02
    result(relu_problem, cpu_hardware, people["amy"], ms=1.00, mad_ms=0.001)
    result(relu_problem, cpu_hardware, people["ben"], ms=1.01, mad_ms=0.001)
    result(relu_problem, cpu_hardware, people["cat"], ms=1.50, mad_ms=0.001)
    result(relu_problem, cpu_hardware, people["dan"], ms=1.70, mad_ms=0.8)
    return relu_problem, cpu_hardware


def test_the_interval_of_a_median_comes_from_the_samples_with_a_floor():
    tight = stats.median_interval({"median_ms": 2.0, "mad_ms": 0.001, "n": 100}, floor=0.02)
    assert (tight.low, tight.high) == pytest.approx((1.96, 2.04))  # the floor
    noisy = stats.median_interval({"median_ms": 2.0, "mad_ms": 0.5, "n": 25}, floor=0.02)
    # 1.96 * 1.2533 * 1.4826 * 0.5 / 5 = 0.364
    assert noisy.half_width == pytest.approx(0.3642, abs=1e-3)
    # Older summaries without mad_ms fall back on the standard deviation.
    old = stats.median_interval({"median_ms": 2.0, "std_ms": 0.5, "n": 25}, floor=0.0)
    assert old.half_width == pytest.approx(1.959964 * 1.2533 * 0.5 / 5)
    assert stats.median_interval(None, median_ms=2.0, floor=0.02).half_width == pytest.approx(
        0.04)
    assert stats.median_interval(None) is None


def test_a_speedup_interval_combines_both_sides_and_agreement_is_overlap():
    cand = {"median_ms": 1.0, "mad_ms": 0.1, "n": 100}
    ref = {"median_ms": 2.0, "mad_ms": 0.2, "n": 100}
    interval = stats.speedup_interval(2.0, cand, ref, floor=0.0)
    one_side = 1.2533 * 1.4826 * 0.1 / 10
    assert interval.high == pytest.approx(2.0 * (1 + 1.959964 * one_side * 2 ** 0.5))
    apart = stats.speedup_interval(1.5, cand, ref, floor=0.0)
    assert not stats.agree(interval, apart) and stats.agree(interval, interval)
    assert stats.agree(interval, None)  # nothing to compare


def test_overlapping_entries_are_ties_that_share_the_rank_above(board):
    problem, hardware = board
    rows = board_rows(problem=problem, hardware=hardware)
    assert [(r["participant"], r["rank"], r["shown_rank"], r["tie"]) for r in rows] == [
        ("amy", 1, 1, False),
        ("ben", 2, 1, True),
        ("cat", 3, 3, False),
        ("dan", 4, 3, True),
    ]
    amy = rows[0]
    assert amy["interval_ms"] == pytest.approx(0.02)
    assert (amy["low_ms"], amy["high_ms"]) == pytest.approx((0.98, 1.02))
    assert rows[3]["interval_ms"] > 0.2  # dan's spread samples


def test_the_board_page_shows_each_interval_and_the_ties(board):
    problem, hardware = board
    html = Client().get(f"/leaderboard/{problem.level}/{problem.number}/{hardware.slug}/")
    text = html.content.decode()
    assert html.status_code == 200
    assert "1 ms <span" in text and "± 0.02</span>" in text
    ranks = [cell.split(">", 1)[1].split("</td>")[0]
             for cell in text.split('<td class="rank"')[1:]]
    assert [r.split(" ")[0] for r in ranks] == ["1", "1", "3", "3"]
    assert ["tie" in r for r in ranks] == [False, True, False, True]


def test_the_board_api_and_exports_carry_the_intervals_and_ties(board, people):
    problem, hardware = board
    api = SchemaCheckedClient().with_token(token_for(people["amy"]))
    response = api.get(
        f"/api/v1/leaderboard/boards/{problem.level}/{problem.number}/{hardware.slug}/")
    assert response.status_code == 200, response.content
    rows = response.json()["rows"]
    assert [(r["shown_rank"], r["tie"]) for r in rows] == [(1, False), (1, True), (3, False),
                                                           (3, True)]
    assert rows[0]["interval_ms"] == pytest.approx(0.02)

    url = f"/leaderboard/{problem.level}/{problem.number}/{hardware.slug}/"
    exported = Client().get(url, {"format": "csv", "table": "board"}).content.decode()
    table = list(csv.DictReader(io.StringIO(exported)))
    assert [(r["participant"], r["shown_rank"], r["tie"]) for r in table] == [
        ("amy", "1", "False"), ("ben", "1", "True"), ("cat", "3", "False"),
        ("dan", "3", "True")]
    assert float(table[0]["interval_ms"]) == pytest.approx(0.02)
    as_json = Client().get(url, {"format": "json", "table": "board"}).json()
    assert [r["tie"] for r in as_json["rows"]] == [False, True, False, True]


def test_a_live_board_event_orders_with_the_shown_ranks_and_marks_ties(
    people, cpu_hardware, relu_problem, settings, django_capture_on_commit_callbacks
):
    settings.TIMING_INTERVAL_FLOOR = 0.02
    make_result(problem=relu_problem, hardware=cpu_hardware, user=people["amy"], ms=1.0)
    with django_capture_on_commit_callbacks(execute=True):
        make_result(problem=relu_problem, hardware=cpu_hardware, user=people["ben"], ms=1.005)

    payload = LiveEvent.objects.get(
        group=f"board-{relu_problem.pk}-{cpu_hardware.slug}").payload
    amy, ben = f"user:{people['amy'].pk}", f"user:{people['ben'].pk}"
    assert payload["order"] == [[amy, 1], [ben, 1, True]]
    [row] = payload["rows"]
    assert (row["key"], row["shown_rank"], row["tie"]) == (ben, 1, True)
