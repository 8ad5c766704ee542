"""A problem's difficulty, as the problems list shows it: one rule, over plain values.

The level sets the step (KernelBench's levels grow from one operator, to a fusion of a few, to a
whole model, to a Hugging Face model), and within a level a reference that takes longer than
the level's median (its eager baseline, on the hardware that measured the most problems) is one
step harder: more work per call, so more memory traffic and arithmetic to organise before a
kernel beats it. Without a baseline the level alone decides. Relative to the level's median
rather than a fixed time, so that a CPU site and a GPU site grade alike.
"""

from statistics import median

LABELS = ("easy", "medium", "hard", "expert")
LEVEL_STEP = {1: 0, 2: 1, 3: 2}  # level 4 and any later one: the last step


def difficulty(*, level: int, baseline_ms: float | None, level_median_ms: float | None) -> str:
    step = LEVEL_STEP.get(level, len(LABELS) - 1)
    if baseline_ms is not None and level_median_ms is not None and baseline_ms > level_median_ms:
        step += 1
    return LABELS[min(step, len(LABELS) - 1)]


def level_medians(baselines: list[tuple[int, float]]) -> dict[int, float]:
    """(level, baseline ms) pairs -> each level's median baseline."""
    by_level: dict[int, list[float]] = {}
    for level, ms in baselines:
        by_level.setdefault(level, []).append(ms)
    return {level: median(values) for level, values in by_level.items()}
