"""The numbers behind the tables, as plain functions over plain values (no Django here).

fast_p follows KernelBench (src/score.py): the share of *all* problems of a level whose kernel is
correct and strictly faster than the baseline by more than p, so a problem with no attempt, or an
incorrect one, counts in the denominator and never in the numerator.
"""

import math
from bisect import bisect_right
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

FAST_P_THRESHOLDS: tuple[float, ...] = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
PASS_AT_K: tuple[int, ...] = (1, 2, 5, 10)


class Outcome(NamedTuple):
    """What one participant (or one sample) achieved on one problem."""

    compiled: bool
    correct: bool
    speedup: float | None = None  # baseline / candidate; None when not measured


@dataclass
class LevelSummary:
    total: int  # problems of the level: the denominator of every rate below
    attempted: int
    compiled: int
    correct: int
    compile_rate: float
    correct_rate: float
    fast_p: dict[float, float] = field(default_factory=dict)
    # fast_p's numerators: how many problems are correct and faster than p (fast_count).
    fast_counts: dict[float, int] = field(default_factory=dict)
    geomean_speedup: float | None = None


def _check_total(total: int) -> None:
    if total < 0:
        raise ValueError(f"the number of problems cannot be negative (got {total})")


def fast_count(speedups_of_correct: Iterable[float | None], *, p: float) -> int:
    """How many correct problems' kernels have speedup > p: fast_p's numerator.

    A correct kernel without a measured speedup is never fast.
    """
    return sum(1 for s in speedups_of_correct if s is not None and s > p)


def fast_p(speedups_of_correct: Iterable[float | None], *, total: int, p: float) -> float:
    """Share of `total` problems whose correct kernel has speedup > p (fast_count over total).

    Pass only the correct problems' speedups; missing and incorrect problems are the rest of
    `total`.
    """
    _check_total(total)
    speedups = list(speedups_of_correct)
    if len(speedups) > total:
        raise ValueError(f"{len(speedups)} correct problems cannot exceed the {total} counted")
    if total == 0:
        return 0.0
    return fast_count(speedups, p=p) / total


def geometric_mean(values: Iterable[float | None]) -> float | None:
    """Geometric mean of the positive values given; None when there are none."""
    logs = [math.log(v) for v in values if v is not None and v > 0]
    if not logs:
        return None
    return math.exp(sum(logs) / len(logs))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k) for c correct of n samples."""
    if not (0 <= c <= n):
        raise ValueError(f"correct samples ({c}) must be between 0 and the samples ({n})")
    if not (1 <= k <= n):
        raise ValueError(f"k ({k}) must be between 1 and the number of samples ({n})")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_pass_at_k(
    counts: Mapping[Hashable, tuple[int, int]],
    *,
    problems: Sequence[Hashable],
    samples: int,
    k: int,
) -> float | None:
    """pass@k averaged over every problem in `problems`.

    `counts` maps a problem to (samples evaluated, samples correct). A problem missing from it,
    or with fewer samples evaluated than planned, has its missing samples counted as failures,
    so n is never below `samples`. None when k exceeds the samples per problem.
    """
    if not problems or k > samples:
        return None
    total = 0.0
    for problem in problems:
        seen, correct = counts.get(problem, (0, 0))
        total += pass_at_k(max(seen, samples), correct, k)
    return total / len(problems)


def level_summary(
    outcomes: Mapping[Hashable, Outcome],
    *,
    problems: Sequence[Hashable],
    thresholds: Sequence[float] = FAST_P_THRESHOLDS,
) -> LevelSummary:
    """Rates over every problem in `problems`; outcomes for other problems are ignored."""
    counted = [outcomes[p] for p in problems if p in outcomes]
    correct_speedups = [o.speedup for o in counted if o.correct]
    return summary_from_counts(
        total=len(problems),
        attempted=len(counted),
        compiled=sum(1 for o in counted if o.compiled or o.correct),
        correct=len(correct_speedups),
        fast_counts={p: fast_count(correct_speedups, p=p) for p in thresholds},
        geomean_speedup=geometric_mean(correct_speedups),
    )


def summary_from_counts(
    *,
    total: int,
    attempted: int,
    compiled: int,
    correct: int,
    fast_counts: Mapping[float, int],
    geomean_speedup: float | None,
) -> LevelSummary:
    """A level's rates from its counts (level_summary's, or counts stored as results land):
    each over `total`, every problem of the level."""
    _check_total(total)

    def share(count: int) -> float:
        return count / total if total else 0.0

    return LevelSummary(
        total=total,
        attempted=attempted,
        compiled=compiled,
        correct=correct,
        compile_rate=share(compiled),
        correct_rate=share(correct),
        fast_p={p: share(n) for p, n in fast_counts.items()},
        fast_counts=dict(fast_counts),
        geomean_speedup=geomean_speedup,
    )


def histogram(values: Iterable[float], *, edges: Sequence[float]) -> list[int]:
    """Counts per bin [edges[i], edges[i+1]); the last bin also takes everything above it."""
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        raise ValueError("histogram edges must be at least two increasing numbers")
    counts = [0] * (len(edges) - 1)
    for value in values:
        if value < edges[0]:
            continue
        counts[min(bisect_right(edges, value), len(counts)) - 1] += 1
    return counts
