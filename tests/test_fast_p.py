"""fast_p, geometric mean, pass@k and rates on fixtures whose answers were worked out by hand."""

import math

import pytest

from evaluation.metrics import (
    Outcome,
    fast_count,
    fast_p,
    geometric_mean,
    histogram,
    level_summary,
    mean_pass_at_k,
    pass_at_k,
)

# A level of five problems. A, B, C correct (2.5x, 1.2x, 0.6x); D compiled but incorrect (its
# 3.0x must not count); E never attempted.
OUTCOMES = {
    "A": Outcome(compiled=True, correct=True, speedup=2.5),
    "B": Outcome(compiled=True, correct=True, speedup=1.2),
    "C": Outcome(compiled=True, correct=True, speedup=0.6),
    "D": Outcome(compiled=True, correct=False, speedup=3.0),
}
LEVEL = ["A", "B", "C", "D", "E"]


def test_fast_p_counts_missing_and_incorrect_problems_in_the_denominator():
    summary = level_summary(OUTCOMES, problems=LEVEL)
    # Numerators by hand: p=0: A,B,C; 0.5: A,B,C; 0.8: A,B; 1: A,B; 1.5: A; 2: A. Over 5.
    assert summary.fast_p == {0.0: 0.6, 0.5: 0.6, 0.8: 0.4, 1.0: 0.4, 1.5: 0.2, 2.0: 0.2}
    assert (summary.total, summary.attempted, summary.compiled, summary.correct) == (5, 4, 4, 3)
    assert summary.compile_rate == pytest.approx(0.8)
    assert summary.correct_rate == pytest.approx(0.6)


def test_fast_p_is_its_count_of_fast_correct_problems_over_the_level():
    summary = level_summary(OUTCOMES, problems=LEVEL)
    # The counts the people table ranks by (fast_1_count): D's 3.0 is incorrect, E missing.
    assert summary.fast_counts == {0.0: 3, 0.5: 3, 0.8: 2, 1.0: 2, 1.5: 1, 2.0: 1}
    assert all(summary.fast_p[p] == n / summary.total for p, n in summary.fast_counts.items())
    assert fast_count([1.0, None, 1.01], p=1.0) == 1


def test_the_geometric_mean_is_over_correct_problems_only():
    summary = level_summary(OUTCOMES, problems=LEVEL)
    # (2.5 * 1.2 * 0.6) ** (1/3) = 1.8 ** (1/3); D's 3.0 is left out.
    assert summary.geomean_speedup == pytest.approx(1.8 ** (1 / 3))
    assert summary.geomean_speedup == pytest.approx(1.2164403991146802)


def test_outcomes_for_problems_outside_the_level_are_ignored():
    retired_extra = {**OUTCOMES, "Z": Outcome(compiled=True, correct=True, speedup=9.0)}
    assert level_summary(retired_extra, problems=LEVEL).fast_p[2.0] == 0.2


def test_a_speedup_equal_to_p_is_not_faster_than_p():
    assert fast_p([1.0], total=1, p=1.0) == 0.0
    assert fast_p([1.0], total=1, p=0.5) == 1.0


def test_a_correct_kernel_without_a_speedup_is_never_fast():
    assert fast_p([None, 3.0], total=4, p=0.0) == 0.25


def test_an_empty_level_has_zero_rates_and_no_geometric_mean():
    summary = level_summary({}, problems=[])
    assert summary.fast_p[0.0] == 0.0 and summary.compile_rate == 0.0
    assert summary.geomean_speedup is None
    assert geometric_mean([]) is None


def test_fast_p_rejects_more_correct_problems_than_the_level_has():
    with pytest.raises(ValueError, match="cannot exceed"):
        fast_p([1.0, 2.0], total=1, p=0)
    with pytest.raises(ValueError, match="negative"):
        fast_p([], total=-1, p=0)


def test_pass_at_k_matches_the_unbiased_estimator_worked_by_hand():
    # n=5 samples, c=2 correct: 1 - C(3,k)/C(5,k).
    assert pass_at_k(5, 2, 1) == pytest.approx(1 - 3 / 5)  # 0.4
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 0.7
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)  # 0.9
    assert pass_at_k(5, 2, 4) == 1.0  # fewer than k failures: some draw always passes
    assert pass_at_k(5, 0, 5) == 0.0
    assert pass_at_k(5, 5, 1) == 1.0


def test_pass_at_k_rejects_impossible_counts():
    with pytest.raises(ValueError, match="between 0"):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError, match="k"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="k"):
        pass_at_k(3, 1, 0)


def test_mean_pass_at_k_counts_missing_samples_and_problems_as_failures():
    # P: 5 samples, 2 correct. Q: only 3 of 5 evaluated, 1 correct -> n=5, c=1. R: nothing.
    counts = {"P": (5, 2), "Q": (3, 1)}
    problems = ["P", "Q", "R"]
    # k=2: P 1 - 3/10 = 0.7; Q 1 - C(4,2)/C(5,2) = 1 - 6/10 = 0.4; R 0.
    assert mean_pass_at_k(counts, problems=problems, samples=5, k=2) == pytest.approx(1.1 / 3)
    # k=1: P 0.4, Q 0.2, R 0.
    assert mean_pass_at_k(counts, problems=problems, samples=5, k=1) == pytest.approx(0.2)
    assert mean_pass_at_k(counts, problems=problems, samples=5, k=10) is None


def test_histogram_bins_are_half_open_and_the_last_one_takes_the_rest():
    edges = (0.0, 0.5, 1.0, 2.0, math.inf)
    assert histogram([0.3, 0.5, 0.9, 1.0, 2.5, 10.0], edges=edges) == [1, 2, 1, 2]
    with pytest.raises(ValueError):
        histogram([1.0], edges=(1.0, 0.5))
