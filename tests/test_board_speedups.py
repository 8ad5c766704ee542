"""A board's speedup column is against one reference time (scoring.board_reference_ms), so it
never contradicts the board's order; a submission's own page keeps its speedup against the
reference timed beside it in its evaluation. Its "vs eager" and "vs compile" columns keep the
order too, a capped result's included (scoring.standing)."""

import pytest
from django.contrib.auth import get_user_model

from evaluation import scoring
from evaluation.services import hardware_register
from evaluator import flags
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


def test_a_capped_entrys_columns_never_contradict_the_order_below_it():
    """A capped result ranks with the reference's time; each of its speedups goes down by the
    same factor. Capped one by one (vs eager at 1), its "vs eager" sat below that of the
    uncapped entry it outranks, where the stored eager baseline was slower than the reference
    timed beside the kernels."""
    gpu = hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")
    ada, bob = people("ada", "bob")
    problem = make_problem(1, 1)
    eager_ms, compile_ms = 1.2, 0.96  # the stored baselines; the reference beside ran 1.0 ms
    for who, ms, note in ((ada, 0.5, [flags.BACKEND_SHARE_SMALL]), (bob, 1.05, [])):
        make_result(problem=problem, hardware=gpu, user=who, ms=ms, reference_ms=1.0,
                    flags=note, speedup_eager=eager_ms / ms, speedup_compile=compile_ms / ms)

    rows = board_rows(problem=problem, hardware=gpu)
    assert [(r["participant"], r["candidate_ms"]) for r in rows] == [("ada", 1.0), ("bob", 1.05)]
    for column in ("speedup", "speedup_eager", "speedup_compile"):
        values = [r[column] for r in rows]
        assert values == sorted(values, reverse=True), (column, values)
    # Each is its baseline over the time it ranks with, as for an uncapped kernel.
    assert rows[0]["speedup_eager"] == pytest.approx(eager_ms / 1.0)
    assert rows[0]["speedup_compile"] == pytest.approx(compile_ms / 1.0)


def test_standing_divides_every_speedup_by_the_factor_the_time_was_raised_by():
    row = {"flags": [flags.BACKEND_SHARE_SMALL], "candidate_median_ms": 0.5,
           "reference_median_ms": 2.0, "speedup": 4.0, "speedup_eager": 6.0,
           "speedup_compile": 3.0}
    assert scoring.standing(row) == pytest.approx(
        {"candidate_median_ms": 2.0, "speedup": 1.0, "speedup_eager": 1.5,
         "speedup_compile": 0.75}
    )
    # No faster than the reference: nothing to cap.
    slow = {**row, "candidate_median_ms": 3.0, "speedup": 2 / 3, "speedup_eager": 0.4}
    assert scoring.standing(slow) == {k: slow[k] for k in scoring.standing(slow)}
