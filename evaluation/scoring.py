"""Which result counts, ranks, compiled, how fast it is and whose it is: the one definition.

Every page, table, API and export decides through these functions and nothing else: the boards
(leaderboard/services.py; which board a result ranks on, one a precision: board_precision), the
tables of models and runs (leaderboard/selectors.py), a run's own page
(submissions/runs/selectors.py), re-verification (submissions/models.py), a competition's
standings and the KernelBench export.

Plain Python over plain values, no Django: a result is a mapping with the keys of ROW_FIELDS (an
`Evaluation.objects.values(*ROW_FIELDS)` row, or `Evaluation.scoring_row()`). Which evaluation of
a submission is its result is also decided once: the latest one on the hardware, whatever its
purpose (submissions.selectors.latest_evaluations), so a re-verification's outcome replaces the
first evaluation's everywhere at once.
"""

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from evaluator import flags as flag_kinds
from evaluator import verdicts

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
    "submission__test_run",
)

# Verdicts reached only after the kernel built and ran at least once.
RAN_VERDICTS = verdicts.RAN_VERDICTS

# Re-verification states that keep a result off the boards and out of every count: waiting for
# its second evaluation (a would-be record), or failed it.
HELD_STATES = frozenset({"pending", "failed"})
PENDING_STATE = "pending"

BASELINES = ("eager", "compile")

# How a model run's tables count a sample correct: "strict" is this module's rule (on_board);
# "kernelbench" is KernelBench's own evaluator's, which checks the outputs only (kernels whose
# claimed backend did not do the work count, notes count, nothing is held or capped).
COUNTINGS = ("strict", "kernelbench")
COUNTING_LABELS = {
    "strict": "strict: correct, no exploit flag, re-verified where it set a record",
    "kernelbench": "KernelBench's counting: correct outputs, even where the kernel's own "
                   "backend did not do the work (backend_not_used)",
}


def exploits(row: Row) -> list[str]:
    """The result's exploit flags (evaluator/flags.py says which flags are notes)."""
    return flag_kinds.exploits(row["flags"])


def notes(row: Row) -> list[str]:
    """The result's notes: facts about an honest result, never listed as exploits."""
    return flag_kinds.notes(row["flags"])


def honest_and_timed(row: Row) -> bool:
    """Correct, no exploit flag, and timed; notes of any kind allowed."""
    return (bool(row["correct"]) and not exploits(row)
            and row["candidate_median_ms"] is not None)


def timing_held(row: Row) -> bool:
    """Honest and timed, but a holding note keeps it off the boards (flags.HOLDING_NOTES: a
    timing the judge's clock did not confirm, so there is no figure it vouches for): never an
    exploit; its owner may ask for another attempt. A timing that a re-verification did not
    reproduce holds nothing: the result ranks at the slowest of its evaluations."""
    return honest_and_timed(row) and any(
        f in flag_kinds.HOLDING_NOTES for f in row["flags"] or []
    )


def ranks(row: Row) -> bool:
    """Correct, no exploit flag, no holding note, timed, and not a test run (which is checked,
    and timed if asked, but never ranked or counted): the result may rank (unless held). Other
    notes (a small own-kernel share) rank, capped by standing()."""
    return (honest_and_timed(row) and not timing_held(row)
            and not row.get("submission__test_run"))


def capped(row: Row) -> bool:
    """Ranks no better than the PyTorch reference timed beside it (flags.CAPPED_NOTES: its own
    kernels do a tiny share of the work, e.g. a copy of what PyTorch computed)."""
    return any(f in flag_kinds.CAPPED_NOTES for f in row.get("flags") or [])


def standing(row: Row) -> dict[str, float | None]:
    """The time and speedups a result ranks and counts with: as measured, except that a capped
    result counts as if it had run in the reference's time (its median raised to at least the
    reference's) and every speedup is divided by that same factor, so each stays its baseline's
    time over the one time it ranks with. Capping each speedup on its own (eager at 1, compile by
    the eager factor) let a capped entry's "vs eager" sit below that of an uncapped entry it
    outranks, whenever the stored eager baseline was slower than the reference timed beside it."""
    cand = row.get("candidate_median_ms")
    out = {"candidate_median_ms": cand, "speedup": row["speedup"],
           "speedup_eager": row["speedup_eager"], "speedup_compile": row["speedup_compile"]}
    if not capped(row):
        return out
    eager = row["speedup"] if row["speedup"] is not None else row["speedup_eager"]
    reference = row.get("reference_median_ms")
    if reference is None and cand is not None and eager is not None:
        reference = cand * eager
    if not cand or reference is None or reference <= cand:
        return out  # not measured, or no faster than the reference: nothing to cap
    out["candidate_median_ms"] = reference
    factor = reference / cand
    for key in ("speedup", "speedup_eager", "speedup_compile"):
        if out[key] is not None:
            out[key] = out[key] / factor
    # Against the reference timed beside it, a capped result is exactly as fast: 1, whatever
    # rounding the division left.
    if out["speedup"] is not None:
        out["speedup"] = min(out["speedup"], 1.0)
    return out


def ranking_ms(row: Row) -> float | None:
    """The median a board orders the result by (standing(): capped where a note says so)."""
    return standing(row)["candidate_median_ms"]


def held(row: Row) -> bool:
    return row.get("submission__reverification") in HELD_STATES


def on_board(row: Row) -> bool:
    """Ranks and is not held: on the boards, and correct in every table, page and export."""
    return ranks(row) and not held(row)


def pending(row: Row) -> bool:
    """Would rank, and waits for its re-verification. A holding note does not count here: it
    is an earlier re-verification's verdict on timing (its owner asked for another attempt),
    which the pending one replaces."""
    return honest_and_timed(row) and row.get("submission__reverification") == PENDING_STATE


def compiled(row: Row) -> bool:
    # A rejection after trials ran (an exploit caught at run time) still compiled.
    return row["verdict"] in RAN_VERDICTS or bool(row["trials"])


def speedup(row: Row, baseline: str = "eager", *, measured: bool = False) -> float | None:
    """Speedup over the named baseline (as it counts: standing(); as measured with
    `measured`); None when not measured."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, not {baseline!r}")
    values = row if measured else standing(row)
    if baseline == "compile":
        return values["speedup_compile"]
    # Eager: the side-by-side measurement of the same evaluation, else the stored baseline.
    return values["speedup"] if values["speedup"] is not None else values["speedup_eager"]


def counted(row: Row, counting: str = "strict") -> bool:
    """Whether a table counts the result correct, by the named counting (COUNTINGS)."""
    if counting == "strict":
        return on_board(row)
    if counting != "kernelbench":
        raise ValueError(f"counting must be one of {', '.join(COUNTINGS)}, not {counting!r}")
    return (bool(row["correct"]) and row["candidate_median_ms"] is not None
            and all(f in flag_kinds.KERNELBENCH_IGNORES for f in row["flags"] or []))


def counted_speedup(row: Row, baseline: str = "eager", counting: str = "strict") -> float | None:
    """The speedup a table counts: only a counted result has one (KernelBench's counting takes
    the speedup as measured, uncapped)."""
    if not counted(row, counting):
        return None
    return speedup(row, baseline, measured=counting == "kernelbench")


def best_of_key(row: Row) -> tuple:
    """Orders a sample's (or a participant's) results, best last: on the board first, then
    compiled, then faster (as it counts: standing())."""
    return (on_board(row), compiled(row), speedup(row) or 0.0)


def board_order(median_ms: float | None, achieved_at: datetime | None, pk: int | None) -> tuple:
    """A board's order: fastest first; a tie goes to whoever got there first, then to the
    lower id."""
    return (median_ms or 0.0, achieved_at, pk or 0)


def board_reference_ms(reference_ms: Iterable[float | None]) -> float | None:
    """The one reference time a board's speedups are against: the median of the reference's
    times measured beside the board's ranked kernels (each evaluation times the reference next
    to the kernel, on the same draws). One number for the whole board, so its speedup column
    never contradicts its order; each submission's own page keeps the speedup against the
    reference timed beside it in its evaluation."""
    times = sorted(t for t in reference_ms if t)
    if not times:
        return None
    middle = len(times) // 2
    return times[middle] if len(times) % 2 else (times[middle - 1] + times[middle]) / 2


def board_speedup(board_reference: float | None, ranking_time_ms: float | None) -> float | None:
    """A ranked result's speedup on its board: the board's reference time over the time it
    ranks with (ranking_ms), so it falls as the rank rises."""
    if not board_reference or not ranking_time_ms:
        return None
    return board_reference / ranking_time_ms


def row_order(row: Row) -> tuple:
    """board_order of a result, by the time it ranks with (ranking_ms)."""
    return board_order(ranking_ms(row), row["finished_at"], row["id"])


# ---- boards: one a (problem, hardware, precision) ---------------------------------------------


def board_precision(row: Row) -> str:
    """The precision of the board a result ranks on: the one it was judged in (its submission's:
    inputs, reference and tolerance all in that precision), whatever the problem's own. A board
    is one (problem, hardware, precision), so a bf16 kernel for an fp32 problem (checked to 1e-2
    against a bf16 reference, on inputs half the size) ranks beside bf16 kernels only, never
    against the fp32 ones that met a tolerance a hundred times tighter; its records are that
    board's too (a new record is re-verified against the board it ranks on)."""
    return row["submission__precision"]


def board_key(row: Row) -> tuple[int, int, str]:
    """The board a result belongs to: (problem, hardware, precision) ids and name."""
    return (row["submission__problem_id"], row["hardware_id"], board_precision(row))


def is_main_board(precision: str, problem_precision: str) -> bool:
    """A problem's own precision is its main board: the one its page, the tables (fast_p, the
    people's and the models' rows), whether a problem is solved, and a competition that names
    no precision read. Boards of other precisions rank on their own, labelled (board_label).
    (leaderboard.models.BoardQuerySet.main_boards is this rule in SQL.)"""
    return precision == problem_precision


def board_label(precision: str, problem_precision: str) -> str:
    """How a board is named beside the others of its problem and hardware: "main board (fp32)",
    "bf16 board"."""
    if is_main_board(precision, problem_precision):
        return f"main board ({precision})"
    return f"{precision} board"


def counts_in_standings(
    row: Row, *, problem_precision: str, precisions: Iterable[str] = ()
) -> bool:
    """Whether a competition's standings count a result: on the board (on_board), and of a
    precision the competition names, or, where it names none, of the problem's own (its main
    board): a competition compares like with like unless it says otherwise."""
    allowed = set(precisions) or {problem_precision}
    return on_board(row) and board_precision(row) in allowed


def participant_key(*, user_id: int | None, model_id: int | None) -> str:
    """Whose a result is on a board (BestEntry.participant, the API's participant_key): a
    model's sample is the model's, whoever started its run; anything else is its user's."""
    return f"model:{model_id}" if model_id else f"user:{user_id}"


def row_participant(row: Row) -> str:
    """participant_key of a result's submission."""
    return participant_key(user_id=row["submission__user_id"],
                           model_id=row["submission__model_id"])
