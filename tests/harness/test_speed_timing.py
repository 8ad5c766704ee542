"""Timing that means what it says on a busy CPU: more work is measured as slower, whatever else
the host is doing, and the timing loop's knobs hold."""

from __future__ import annotations

import subprocess
import sys

import torch

from evaluator.runner.sandbox import run_job
from evaluator.timing import time_callable

from .conftest import make_job

# 32 MB a tensor, beyond the caches: with 4 MB ones, the K sums of the candidate found their
# inputs and a just-freed output buffer hot in the cache and measured only 3.2 to 4 times the
# reference's one sum on a loaded host (about 9 to 10 times at this size).
ADD = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return a + b

def get_inputs():
    return [torch.randn(1 << 23), torch.randn(1 << 23)]

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


def test_a_kernel_doing_k_times_the_work_is_measured_at_least_k_over_4_times_slower():
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
    # The two sides are timed one after the other, each with the share of the two cores that the
    # hogs leave it then, and those shares can differ by twice: on CI the candidate's eight sums
    # took 226 ms (28 ms a sum) and the reference's one 61 ms, 3.7 times, where runs here give 6
    # to 9. The fault this guards against measured such a kernel 16.9 times *faster*.
    assert slower >= K / 4, (result["candidate"], result["reference"])
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


def _spread_failures(noise: float, outliers: float, evaluations: int = 500) -> tuple[float, int]:
    """The default stop rule applied to simulated calls (true median 1.0: Gaussian noise, and a
    share of calls slowed by half, as preemption or a clock change does). Returns the share of
    groups of 5 evaluations whose medians spread by more than 1%, and the median call count."""
    import random
    import statistics

    from evaluator.config import DEFAULT_TIMING
    from evaluator.timing import is_stable

    rng = random.Random(20240611)
    medians, counts = [], []
    for _ in range(evaluations):
        samples: list[float] = []
        while len(samples) < DEFAULT_TIMING["max_reps"]:
            slow = 1.5 if rng.random() < outliers else 1.0
            samples.append(slow * rng.gauss(1.0, noise))
            if is_stable(samples, DEFAULT_TIMING["min_reps"], DEFAULT_TIMING["target_rel_err"]):
                break
        medians.append(statistics.median(samples))
        counts.append(len(samples))
    groups = [medians[i:i + 5] for i in range(0, evaluations, 5)]
    spread = sum((max(g) - min(g)) / g[0] > 0.01 for g in groups) / len(groups)
    return spread, int(statistics.median(counts))


def test_the_default_stop_rule_keeps_5_repeated_medians_within_one_percent():
    # A steady kernel (0.5% noise) stops at the minimum number of calls.
    spread, calls = _spread_failures(noise=0.005, outliers=0.02)
    assert spread == 0 and calls == 20
    # Calls varying by 1 to 3% with outliers take more calls (within the cap), and still hold.
    for noise, outliers, evaluations in ((0.01, 0.05, 500), (0.03, 0.1, 200)):
        spread, calls = _spread_failures(noise, outliers, evaluations)
        assert spread <= 0.025, (noise, spread, calls)


def test_timing_defaults_hold_one_percent_on_a_gpu_and_stay_short_on_a_cpu():
    from evaluator.config import normalize_job

    base = {"reference_source": "", "candidate_source": ""}
    gpu = normalize_job({**base, "device": "cuda"})["timing"]
    cpu = normalize_job({**base, "device": "cpu"})["timing"]
    assert gpu["max_reps"] == 500 and gpu["target_rel_err"] == 0.0015 and gpu["min_reps"] == 20
    assert cpu["max_reps"] == 100 and cpu["cpu_threads"] == 1
    chosen = normalize_job({**base, "device": "cpu", "timing": {"max_reps": 50}})["timing"]
    assert chosen["max_reps"] == 50  # a job's own setting wins
