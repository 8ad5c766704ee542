"""The sharing bench's real mix (bench/gpu_sharing.py) is a stream: its 4096 x 393216 problems
come spread through the small ones, not all first, and it ends on a small right kernel (the
warm-up)."""

from bench.gpu_sharing import real_mix, spread_through
from bench.kernels.activations import ACTIVATIONS
from tests.conftest import KERNELBENCH


def test_the_few_are_spread_evenly_and_the_many_keep_their_ends():
    mixed = spread_through(["A", "B"], list(range(6)))
    assert mixed == [0, 1, "A", 2, 3, "B", 4, 5]
    assert spread_through([], [1, 2]) == [1, 2]
    assert spread_through(["A"], []) == ["A"]


def test_the_real_mix_brings_its_large_problems_among_the_small_ones(tmp_path):
    mix = real_mix(tmp_path, KERNELBENCH, 8, pairs=True, restated=30)
    large = [index for index, item in enumerate(mix) if item[0] in ACTIVATIONS]
    assert len(mix) == 60 and len(large) == 18  # bench/kernels/' ReLU kernels too
    # 42 small kernels in 19 gaps: never one large kernel right after another.
    assert all(b - a >= 2 for a, b in zip(large, large[1:], strict=False))
    assert large[0] > 0 and mix[-1][0] not in ACTIVATIONS and "wrong" not in mix[-1][1]
