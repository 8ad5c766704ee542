"""Confidence intervals on timings and speedups: how noisy a measurement is, in one place.

Plain Python over the timing summaries an evaluation stores (Evaluation.candidate_stats and
reference_stats: median_ms, mean_ms, std_ms, min_ms, max_ms, n, and mad_ms where the harness
recorded it). Used by re-verification (do the evaluations of the same kernel agree? `settle`,
its one rule: two that agree settle it, a disagreement calls a third, and three that do not
agree rank at the slowest) and by the boards (the interval beside each time; entries whose
intervals overlap are shown as ties).

The samples themselves are not stored, so the interval is computed from the summary, without a
bootstrap: the median's standard error under a normal approximation,

    se(median) = 1.2533 * sigma / sqrt(n)

with sigma the robust spread 1.4826 * MAD where the summary has `mad_ms` (evaluations stored
after it was added to evaluator/timing.summarize), else the samples' standard
deviation (older evaluations; a few slow outliers widen it, which errs towards "agree"). The
95% interval is median +- 1.96 se.

Within-run noise is not all the noise: two evaluations of the same kernel on different runners,
or minutes apart, differ by more than one run's samples say (clocks, neighbours, placement). So
every interval is at least `floor` (a share of the value, settings.TIMING_INTERVAL_FLOOR) wide
on each side.

A speedup (reference median / candidate median, timed side by side) gets the two relative
errors combined in quadrature, as a ratio of independent estimates does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Z_95 = 1.959964  # two-sided 95%
MEDIAN_SE_FACTOR = 1.2533  # sqrt(pi / 2): se(median) / (sigma / sqrt(n)) for normal samples
MAD_TO_SIGMA = 1.4826
DEFAULT_FLOOR = 0.02  # settings.TIMING_INTERVAL_FLOOR's default


@dataclass(frozen=True)
class Interval:
    """A value with its 95% confidence interval [low, high]."""

    value: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        """The larger distance from the value to an end (the "+-" shown beside it)."""
        return max(self.value - self.low, self.high - self.value)

    def overlaps(self, other: Interval | None) -> bool:
        return other is not None and self.low <= other.high and other.low <= self.high

    def as_dict(self) -> dict[str, float]:
        return {"value": self.value, "low": self.low, "high": self.high}


def median_relative_se(stats: Mapping[str, Any] | None) -> float | None:
    """The median's standard error as a share of it, from a stored summary; None when the
    summary cannot say (no median, fewer than two samples, no spread recorded)."""
    if not stats:
        return None
    median, n = stats.get("median_ms"), stats.get("n")
    if not median or median <= 0 or not n or n < 2:
        return None
    mad = stats.get("mad_ms")
    sigma = MAD_TO_SIGMA * mad if mad is not None else stats.get("std_ms")
    if sigma is None or sigma < 0:
        return None
    return MEDIAN_SE_FACTOR * sigma / math.sqrt(n) / median


def _around(value: float, relative: float | None, *, floor: float) -> Interval:
    """value +- max(1.96 * relative, floor) of it; only the floor where nothing else is known."""
    half = max(Z_95 * relative, floor) if relative is not None else floor
    return Interval(value=value, low=value * (1 - half) if half < 1 else 0.0,
                    high=value * (1 + half))


def median_interval(
    stats: Mapping[str, Any] | None, *, median_ms: float | None = None,
    floor: float = DEFAULT_FLOOR,
) -> Interval | None:
    """The 95% interval of a kernel's median time (ms). `median_ms` when the median to centre
    on is stored apart from the summary; None without a median."""
    value = median_ms if median_ms is not None else (stats or {}).get("median_ms")
    if value is None or value <= 0:
        return None
    return _around(value, median_relative_se(stats), floor=floor)


def speedup_interval(
    speedup: float | None, candidate_stats: Mapping[str, Any] | None,
    reference_stats: Mapping[str, Any] | None, *, floor: float = DEFAULT_FLOOR,
) -> Interval | None:
    """The 95% interval of a side-by-side speedup (reference median / candidate median)."""
    if speedup is None or speedup <= 0:
        return None
    rc, rr = median_relative_se(candidate_stats), median_relative_se(reference_stats)
    relative = None if rc is None and rr is None else math.hypot(rc or 0.0, rr or 0.0)
    return _around(speedup, relative, floor=floor)


def agree(first: Interval | None, second: Interval | None) -> bool:
    """Two measurements of the same thing agree when their intervals overlap; without both
    there is nothing to compare."""
    if first is None or second is None:
        return True
    return first.overlaps(second)


def ties(intervals: Sequence[Interval | None]) -> list[bool]:
    """For entries in board order: whether each one's interval overlaps the one above it."""
    return [i > 0 and agree_both(intervals[i - 1], iv) for i, iv in enumerate(intervals)]


def agree_both(first: Interval | None, second: Interval | None) -> bool:
    """Like agree, but nothing known is no tie."""
    return first is not None and second is not None and first.overlaps(second)


def shown_ranks(ranks: Sequence[int], tied: Sequence[bool]) -> list[int]:
    """Ranks as a board shows them: an entry tied with the one above shares its rank."""
    shown: list[int] = []
    for i, rank in enumerate(ranks):
        shown.append(shown[-1] if i > 0 and tied[i] else rank)
    return shown


# ---- re-verification: do the evaluations of one kernel agree? ------------------------------------

AGREE = "agree"  # two of them agree: it ranks on the slower of those two
THIRD = "third"  # no two agree yet (or one timing was set aside): a third evaluation decides
# No two agree once the third was made: it ranks on the slowest of them all, with the note
# timing_not_reproduced (a fact about the measurement, never a reason to keep it off a board).
APART = "apart"


@dataclass(frozen=True)
class Settlement:
    """What re-verification concludes from the evaluations so far (in the order they ran)."""

    outcome: str  # AGREE, THIRD or APART
    agreeing: tuple[int, int] | None = None  # the indexes of the two that agree
    # The index of the evaluation whose timing it ranks on: the slower of the two that agree
    # (AGREE), the slowest of all (APART); None while a third is to come (THIRD).
    ranked_on: int | None = None


def settle(
    intervals: Sequence[Interval | None], *, higher_is_faster: bool = True, last: bool = False
) -> Settlement:
    """The one rule of re-verification, over the speedups (or medians) of the evaluations of
    one kernel whose timing counts (at most three, in the order they ran), each with its 95%
    interval. `last`: no further evaluation comes (the third was made).

    A re-verification decides how fast a would-be record is, never whether it ranks (only a
    verdict or an exploit flag does that), and the doubt always goes against the record, so
    nothing is gained by a timing that was fast once, by luck or by a trick:

    - Two that agree (agree(): their intervals overlap; nothing known agrees) settle it: it
      ranks on the slower of the two (the slowest such one where more than one pair agrees).
    - Otherwise a third evaluation decides (THIRD); once it was made (`last`, or three
      compared), none agreeing is APART: it ranks on the slowest of them all.
    """
    if not 0 < len(intervals) <= 3:
        raise ValueError(f"settle compares one to three evaluations, not {len(intervals)}")

    def speed(i: int) -> float:
        iv = intervals[i]
        if iv is None:
            return math.inf if higher_is_faster else -math.inf  # never chosen as the slower
        return iv.value if higher_is_faster else -iv.value

    pairs = [(i, j) for i in range(len(intervals)) for j in range(i + 1, len(intervals))
             if agree(intervals[i], intervals[j])]
    if not pairs:
        if not (last or len(intervals) == 3):
            return Settlement(THIRD)
        return Settlement(APART, ranked_on=min(range(len(intervals)), key=speed))
    slower = {pair: min(pair, key=speed) for pair in pairs}
    pair = min(pairs, key=lambda p: (speed(slower[p]), -p[1]))
    return Settlement(AGREE, agreeing=pair, ranked_on=slower[pair])
