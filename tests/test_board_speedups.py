"""A board's speedup column is against one reference time (scoring.board_reference_ms), so it
never contradicts the board's order; a submission's own page keeps its speedup against the
reference timed beside it in its evaluation."""

import pytest
from django.contrib.auth import get_user_model

from evaluation.services import hardware_register
from leaderboard.models import BestEntry
from leaderboard.selectors import board_reference, board_rows
from leaderboard.services import boards_rebuild
from tests.leaderboard_factory import make_problem, make_result

pytestmark = pytest.mark.django_db


def people(*names: str):
    return [get_user_model().objects.create_user(username=n, password="a-long-passphrase-1")
            for n in names]


@pytest.fixture
def board():
    gpu = hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")
    ada, bob, cy = people("ada", "bob", "cy")
    problem = make_problem(1, 1)
    # Each reference timed beside its kernel on a drifting host: the fastest kernel's reference
    # ran fast too, so against its own reference it looks slower than the second.
    make_result(problem=problem, hardware=gpu, user=ada, ms=0.1533, reference_ms=0.1441)
    make_result(problem=problem, hardware=gpu, user=bob, ms=0.1683, reference_ms=0.1767)
    make_result(problem=problem, hardware=gpu, user=cy, ms=0.2000, reference_ms=0.1600)
    return problem, gpu


def test_the_boards_speedups_fall_as_the_rank_rises(board):
    problem, gpu = board
    rows = board_rows(problem=problem, hardware=gpu)
    assert [r["participant"] for r in rows] == ["ada", "bob", "cy"]
    speedups = [r["speedup"] for r in rows]
    assert speedups == sorted(speedups, reverse=True), speedups


def test_every_speedup_on_a_board_is_against_its_median_reference(board):
    problem, gpu = board
    reference = board_reference(problem_id=problem.pk, hardware_id=gpu.pk)
    assert reference == pytest.approx(0.1600)  # the median of the three references
    for row in board_rows(problem=problem, hardware=gpu):
        assert row["speedup"] == pytest.approx(reference / row["candidate_ms"])
        # The kernel's own evaluation still has the speedup against the reference beside it.
        assert row["reference_ms"] / row["candidate_ms"] != pytest.approx(row["speedup"]) \
            or row["participant"] == "cy"


def test_a_rebuild_gives_the_boards_the_same_speedups(board):
    problem, gpu = board
    before = {e.participant: e.speedup for e in BestEntry.objects.all()}
    BestEntry.objects.update(speedup=None, rank=None)
    boards_rebuild()
    after = {e.participant: e.speedup for e in BestEntry.objects.all()}
    assert after == pytest.approx(before)
