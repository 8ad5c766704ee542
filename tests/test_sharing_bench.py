"""The sharing bench's real mix (bench/gpu_sharing.py) is a stream: its 4096 x 393216 problems
come spread through the small ones, not all first; in issue 41's mix, its last right kernel
(the warm-up's) is a small PyTorch one."""

import pytest

from bench.gpu_sharing import real_mix, spread_through
from bench.kernels.activations import ACTIVATIONS
from tests.conftest import KERNELBENCH


def test_the_few_are_spread_evenly_and_the_many_keep_their_ends():
    mixed = spread_through(["A", "B"], list(range(6)))
    assert mixed == [0, 1, "A", 2, 3, "B", 4, 5]
    assert spread_through([], [1, 2]) == [1, 2]
    assert spread_through(["A"], []) == ["A"]


def _never_two_large_in_a_row(mix: list) -> list[int]:
    large = [index for index, item in enumerate(mix) if item[0] in ACTIVATIONS]
    assert all(b - a >= 2 for a, b in zip(large, large[1:], strict=False)), large
    assert large[0] > 0 and mix[-1][0] not in ACTIVATIONS
    return large


def test_the_real_mix_brings_its_large_problems_among_the_small_ones(tmp_path):
    # Four problems in pairs and bench/kernels/' two ReLU kernels among gpu_kernels/' twelve.
    assert len(_never_two_large_in_a_row(real_mix(tmp_path, KERNELBENCH, 4, pairs=True))) == 10


@pytest.mark.skipif(not (KERNELBENCH / "level2").is_dir(),
                    reason="needs KernelBench's level 2 problems (KERNELBENCH_PATH)")
def test_issue_41s_mix_is_sixty_kernels_eighteen_of_them_large(tmp_path):
    mix = real_mix(tmp_path, KERNELBENCH, 8, pairs=True, restated=30)
    assert len(mix) == 60 and len(_never_two_large_in_a_row(mix)) == 18
    warm_up = [item for item in mix if "wrong" not in item[1]][-1]
    assert warm_up[0] not in ACTIVATIONS and warm_up[2] == "torch"
