"""Which result counts, ranks, compiled and how fast it is: the one definition.

Every page, table, API and export decides through these functions and nothing else: the boards
(leaderboard/services.py), the tables of models and runs (leaderboard/selectors.py), a run's own
page (submissions/runs.py), re-verification (submissions/models.py) and the KernelBench export.

Plain Python over plain values, no Django: a result is a mapping with the keys of ROW_FIELDS (an
`Evaluation.objects.values(*ROW_FIELDS)` row, or `Evaluation.scoring_row()`). Which evaluation of
a submission is its result is also decided once: the latest one on the hardware, whatever its
purpose (submissions.selectors.latest_evaluations), so a re-verification's outcome replaces the
first evaluation's everywhere at once.
"""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from evaluation.harness import verdicts

Row = Mapping[str, Any]

ROW_FIELDS = (
    "id",
    "submission_id",
    "hardware_id",
    "verdict",
    "correct",
    "flags",
    "trials",
    "candidate_median_ms",
    "reference_median_ms",
    "speedup",
    "speedup_eager",
    "speedup_compile",
    "finished_at",
    "submission__backend",
    "submission__precision",
    "submission__user_id",
    "submission__model_id",
    "submission__problem_id",
    "submission__reverification",
)

# Verdicts reached only after the kernel built and ran at least once.
RAN_VERDICTS = verdicts.RAN_VERDICTS

# Re-verification states that keep a result off the boards and out of every count: waiting for
# its second evaluation (a would-be record), or failed it.
HELD_STATES = frozenset({"pending", "failed"})
PENDING_STATE = "pending"

BASELINES = ("eager", "compile")


def ranks(row: Row) -> bool:
    """Correct, no exploit flag, and timed: the result may rank (unless held)."""
    return bool(row["correct"]) and not row["flags"] and row["candidate_median_ms"] is not None


def held(row: Row) -> bool:
    return row.get("submission__reverification") in HELD_STATES


def on_board(row: Row) -> bool:
    """Ranks and is not held: on the boards, and correct in every table, page and export."""
    return ranks(row) and not held(row)


def pending(row: Row) -> bool:
    """Would rank, and waits for its re-verification."""
    return ranks(row) and row.get("submission__reverification") == PENDING_STATE


def compiled(row: Row) -> bool:
    # A rejection after trials ran (an exploit caught at run time) still compiled.
    return row["verdict"] in RAN_VERDICTS or bool(row["trials"])


def speedup(row: Row, baseline: str = "eager") -> float | None:
    """Speedup over the named baseline; None when not measured."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, not {baseline!r}")
    if baseline == "compile":
        return row["speedup_compile"]
    # Eager: the side-by-side measurement of the same evaluation, else the stored baseline.
    return row["speedup"] if row["speedup"] is not None else row["speedup_eager"]


def counted_speedup(row: Row, baseline: str = "eager") -> float | None:
    """The speedup a table counts: only a result on the board has one."""
    return speedup(row, baseline) if on_board(row) else None


def best_of_key(row: Row) -> tuple:
    """Orders a sample's (or a participant's) results, best last: on the board first, then
    compiled, then faster."""
    return (on_board(row), compiled(row), speedup(row) or 0.0)


def board_order(median_ms: float | None, achieved_at: datetime | None, pk: int | None) -> tuple:
    """A board's order: fastest first; a tie goes to whoever got there first, then to the
    lower id."""
    return (median_ms or 0.0, achieved_at, pk or 0)
