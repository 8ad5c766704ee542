"""Timing that means what it says on a busy CPU: more work is measured as slower, whatever else
the host is doing, and the timing loop's knobs hold."""

from __future__ import annotations

import subprocess
import sys

import torch

from evaluation.harness.sandbox import run_job
from evaluation.harness.timing import time_callable

from .conftest import make_job

ADD = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return a + b

def get_inputs():
    return [torch.randn(1 << 20), torch.randn(1 << 20)]

def get_init_inputs():
    return []
'''

K = 8
# The same sum, computed K times: K times the reference's work.
ADD_K_TIMES = f'''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, a, b):
        out = a + b
        for _ in range({K - 1}):
            out = a + b
        return out
'''

TIMING = {"warmup": 2, "min_reps": 10, "max_reps": 60, "max_seconds": 2.0, "sets": 2}


def test_a_kernel_doing_k_times_the_work_is_measured_at_least_k_over_2_times_slower():
    # Both cores busy with other work meanwhile, as on a shared runner: with several OpenMP
    # threads per side this once made such a kernel look 16.9 times faster than the reference.
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        result = run_job(make_job(ADD, ADD_K_TIMES, measure=True, n_trials=2, timing=TIMING))
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert result["verdict"] == "correct", result["error"]
    slower = result["candidate"]["median_ms"] / result["reference"]["median_ms"]
    assert slower >= K / 2, (result["candidate"], result["reference"])
    assert result["environment"]["timing_threads"] == 1


def test_cpu_timing_runs_on_the_configured_threads_and_restores_them():
    seen: list[int] = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        seen.append(torch.get_num_threads())
        return x + 1

    before = torch.get_num_threads()
    stats = time_callable(fn, [[torch.ones(8)]], "cpu", warmup=1, min_reps=3, max_reps=5,
                          cpu_threads=1)
    assert set(seen) == {1} and stats["threads"] == 1
    assert torch.get_num_threads() == before
    seen.clear()
    stats = time_callable(fn, [[torch.ones(8)]], "cpu", warmup=1, min_reps=3, max_reps=5,
                          cpu_threads=0)
    assert set(seen) == {before} and stats["threads"] == before


def test_warm_up_lasts_at_least_warmup_ms_within_the_call_cap():
    stats = time_callable(lambda x: x + 1, [[torch.ones(8)]], "cpu", warmup=1, min_reps=3,
                          max_reps=1000, warmup_ms=30.0)
    assert sum(stats["warmup_ms"]) > 0 and len(stats["warmup_ms"]) > 1
    capped = time_callable(lambda x: x + 1, [[torch.ones(8)]], "cpu", warmup=1, min_reps=3,
                           max_reps=4, warmup_ms=10_000.0)
    assert len(capped["warmup_ms"]) == 4


def _simulate_medians(runs: int, noise: float, outliers: float) -> tuple[list[float], list[int]]:
    """The default stop rule applied to simulated calls (true median 1.0): Gaussian noise, and a
    share of calls slowed by half (preemption, clock changes)."""
    import random
    import statistics

    from evaluation.harness.config import DEFAULT_TIMING
    from evaluation.harness.timing import is_stable

    rng = random.Random(20240611)
    medians, counts = [], []
    for _ in range(runs):
        samples: list[float] = []
        while len(samples) < DEFAULT_TIMING["max_reps"]:
            slow = 1.5 if rng.random() < outliers else 1.0
            samples.append(slow * rng.gauss(1.0, noise))
            if is_stable(samples, DEFAULT_TIMING["min_reps"], DEFAULT_TIMING["target_rel_err"]):
                break
        medians.append(statistics.median(samples))
        counts.append(len(samples))
    return medians, counts


def test_the_default_stop_rule_keeps_repeated_medians_within_one_percent():
    # A GPU kernel's calls vary by about 1% with a few outliers: the loop stops early, and the
    # medians of repeated evaluations agree within 1% (the criterion: 5 repeats).
    medians, counts = _simulate_medians(400, noise=0.01, outliers=0.05)
    off = [m for m in medians if abs(m - 1.0) > 0.005]
    assert len(off) <= len(medians) // 100, off  # each within 0.5%: any two within 1%
    assert max(counts) < 200 and sorted(counts)[len(counts) // 2] <= 40
    # Noisier calls (3%) take more of them, and still hold.
    medians, counts = _simulate_medians(200, noise=0.03, outliers=0.1)
    assert sum(abs(m - 1.0) > 0.005 for m in medians) <= len(medians) // 50
