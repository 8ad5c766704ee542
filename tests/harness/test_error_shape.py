"""The shape of a wrong output's error (evaluator/judge/error_shape.py), found before any guess
at its cause, on the stored outputs of real wrong kernels (tests/harness/wrong_kernels/: each
kernel beside its reference, run once by record.py; no GPU, no kernel run here) and on a few
made-up outputs. Only the TF32 matmul, whose error is small and everywhere, gets the precision
hint; the ReLU wrong only in its last column (issue 64) got "Maybe a precision issue" before."""

from __future__ import annotations

import json

import pytest
import torch

from evaluator.judge import error_shape
from evaluator.judge.diagnose import TF32_HINT, diagnose, trial_diagnosis
from evaluator.judge.error_shape import find

from .wrong_kernels import record

TOL = record.TOLERANCE


def stored_diagnosis(name: str) -> dict:
    """The judge's diagnosis of a stored wrong output, the reference model at hand for the
    precision check (as in a failed trial)."""
    outputs, case = record.stored(name), record.case(name)
    return trial_diagnosis(case["model"], case["inputs"], outputs["expected"], outputs["got"],
                           atol=TOL, rtol=TOL)


@pytest.mark.parametrize("name", record.CASES)
def test_the_stored_outputs_are_what_the_wrong_kernels_and_references_return(name):
    outputs, now = record.stored(name), record.run(name)
    assert outputs["seed"] == record.SEED
    for key in ("expected", "got"):
        # Matmuls and convolutions may round differently on another CPU: allclose.
        assert torch.allclose(outputs[key], now[key], rtol=1e-5, atol=1e-5, equal_nan=True)


def test_a_wrong_last_column_is_named_a_tail_bug_without_a_precision_hint():
    report = stored_diagnosis("tail_column_relu")
    pattern = report["pattern"]
    n = report["outside_tolerance"]
    assert pattern["kind"] == "tail" and pattern["count"] == n
    assert pattern["ranges"] == [{"dim": 1, "ranges": [[511, 511]]}]
    assert pattern["sentence"].startswith(
        f"All {n} wrong values are in the last column, 511, and are 0 where the reference is "
        "not: a boundary or tail bug")
    assert all(w["position"][1] == 511 for w in report["worst"])
    # No guess at precision, and no recomputation to make one.
    assert "hint" not in report and "precision" not in report
    assert pattern["fits_precision"] is False
    json.dumps(report, allow_nan=False)


def test_a_wrong_first_row_is_named_a_bug_at_the_start():
    pattern = stored_diagnosis("first_row_bias")["pattern"]
    assert pattern["kind"] == "head"
    assert pattern["ranges"] == [{"dim": 0, "ranges": [[0, 0]]}]
    assert pattern["count"] == 256 and pattern["fraction"] == pytest.approx(1 / 32)
    assert pattern["sentence"].startswith("All 256 wrong values are in the first row, 0: ")


def test_a_convolutions_wrong_halo_is_named_a_halo_bug():
    report = stored_diagnosis("conv_halo")
    pattern = report["pattern"]
    # 2 images x 8 channels x the 60 border elements of a 16x16 plane.
    assert pattern["kind"] == "halo" and pattern["border"] == 1 and pattern["count"] == 960
    assert "on the border of the 16x16 planes" in pattern["sentence"]
    assert "none inside: a halo or padding bug" in pattern["sentence"]
    assert "hint" not in report


def test_a_transposed_output_is_named_transposed():
    pattern = stored_diagnosis("transposed_matmul")["pattern"]
    assert pattern["kind"] == "transposed"
    assert "got[..., i, j] = expected[..., j, i]" in pattern["sentence"]


def test_an_off_by_one_load_is_named_a_shift_with_its_dimension_and_direction():
    pattern = stored_diagnosis("shifted_silu")["pattern"]
    assert pattern["kind"] == "shifted" and pattern["shift"] == {"dim": 1, "by": 1}
    assert pattern["sentence"].startswith("The output is the expected shifted by 1 column "
                                          "(got[i] = expected[i - 1] along dimension 1")


def test_a_forgotten_scale_is_named_with_its_factor():
    pattern = stored_diagnosis("unscaled_scores")["pattern"]
    assert pattern["kind"] == "scale" and pattern["factor"] == 8.0
    assert pattern["sentence"].startswith("The output is the expected times 8 (2048 of 2048")


def test_an_overflowing_softmax_is_named_nan():
    report = stored_diagnosis("nan_softmax")
    pattern = report["pattern"]
    assert pattern["kind"] == "nan" and pattern["count"] == report["nonfinite"]["nan"]
    assert pattern["sentence"].startswith(f"All {pattern['count']} wrong values are NaN")
    assert "exp without subtracting the max" in pattern["sentence"]
    assert "precision" not in report


def test_a_tf32_matmul_fits_rounding_and_gets_the_tf32_hint():
    report = stored_diagnosis("tf32_matmul")
    pattern = report["pattern"]
    assert pattern["kind"] == "rounding" and pattern["fits_precision"] is True
    assert "in all 64 rows and all 64 columns" in pattern["sentence"]
    assert report["precision_match"] == "tf32" and TF32_HINT in report["hint"]


def test_only_the_tf32_matmul_gets_a_precision_hint():
    hinted = [name for name in record.CASES
              if "precision_match" in stored_diagnosis(name)]
    assert hinted == ["tf32_matmul"]


# --- made-up outputs: the other shapes, and the pass's bounds ------------------------------

def _relu(rows: int = 64, cols: int = 512) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.relu(torch.randn(rows, cols))


def test_an_unhandled_tail_block_is_named_with_its_index_range():
    expected = _relu()
    got = expected.clone()
    got[:, 448:] = -1.0
    pattern = find(expected, got, atol=TOL, rtol=TOL)
    assert pattern["kind"] == "tail"
    assert pattern["ranges"] == [{"dim": 1, "ranges": [[448, 511]]}]
    assert "in the last 64 columns, 448-511" in pattern["sentence"]


def test_errors_at_both_ends_of_a_dimension_are_an_edge_bug():
    expected = _relu()
    got = expected.clone()
    got[0] += 1
    got[-1] += 1
    pattern = find(expected, got, atol=TOL, rtol=TOL)
    assert pattern["kind"] == "edges"
    assert pattern["ranges"] == [{"dim": 0, "ranges": [[0, 0], [63, 63]]}]
    assert "the first row and the last row (0 and 63)" in pattern["sentence"]
    assert "where they are the expected plus 1" in pattern["sentence"]


def test_every_fourth_column_wrong_is_named_a_stride_bug():
    expected = _relu()
    got = expected.clone()
    got[:, 3::4] = -1.0
    pattern = find(expected, got, atol=TOL, rtol=TOL)
    assert pattern["kind"] == "strided"
    assert pattern["period"] == {"dim": 1, "every": 4, "at": 3}
    assert "in every 4th column only (3, 7, 11, ...)" in pattern["sentence"]


def test_a_flipped_sign_an_offset_and_unwritten_zeros_are_named():
    torch.manual_seed(1)
    expected = torch.randn(32, 64)
    assert find(expected, -expected, atol=TOL, rtol=TOL)["kind"] == "sign"
    offset = find(expected, expected + 0.25, atol=TOL, rtol=TOL)
    assert offset["kind"] == "offset" and offset["offset"] == 0.25
    zeros = find(expected, torch.zeros_like(expected), atol=TOL, rtol=TOL)
    assert zeros["kind"] == "zeros" and "never written" in zeros["sentence"]


def test_an_output_written_column_major_is_named_so():
    torch.manual_seed(2)
    expected = torch.randn(32, 48)
    got = expected.T.contiguous().view(32, 48)
    assert find(expected, got, atol=TOL, rtol=TOL)["kind"] == "column_major"


def test_a_single_wrong_value_is_given_with_its_position():
    expected = _relu()
    got = expected.clone()
    got[5, 7] = float("nan")
    pattern = find(expected, got, atol=TOL, rtol=TOL)
    assert pattern["kind"] == "single" and pattern["position"] == [5, 7]
    assert pattern["sentence"] == "Only one value is wrong, at (5, 7), and it is NaN"
    assert pattern["fits_precision"] is False


def test_a_large_error_everywhere_is_no_pattern_and_not_rounding():
    expected = _relu()
    torch.manual_seed(3)
    pattern = find(expected, expected + torch.randn_like(expected), atol=TOL, rtol=TOL)
    assert pattern["kind"] == "spread" and pattern["fits_precision"] is False
    assert pattern["sentence"].endswith("no pattern in their positions or values")


def test_nothing_is_found_in_a_right_output_or_outputs_of_other_shapes():
    expected = _relu()
    assert find(expected, expected.clone(), atol=TOL, rtol=TOL) is None
    assert find(expected, expected.T, atol=TOL, rtol=TOL) is None
    assert find(expected, expected.double(), atol=TOL, rtol=TOL) is None


def test_integer_outputs_are_compared_exactly():
    expected = torch.arange(64 * 32).reshape(64, 32)
    got = expected.clone()
    got[:, -1] += 1
    pattern = find(expected, got, atol=TOL, rtol=TOL)
    assert pattern["kind"] == "tail" and pattern["count"] == 64


def test_the_pass_in_small_chunks_finds_what_one_pass_finds(monkeypatch):
    # A large output is read a chunk at a time (its extra memory bounded): chunk edges must
    # change no count, range or sample-based relation.
    outputs = record.stored("conv_halo")
    whole = find(outputs["expected"], outputs["got"], atol=TOL, rtol=TOL)
    monkeypatch.setattr(error_shape, "CHUNK", 97)
    monkeypatch.setattr(error_shape, "SAMPLE", 256)
    chunked = find(outputs["expected"], outputs["got"], atol=TOL, rtol=TOL)
    assert chunked == whole
    shifted = record.stored("shifted_silu")
    assert find(shifted["expected"], shifted["got"], atol=TOL, rtol=TOL)["kind"] == "shifted"


def test_a_failing_pattern_finder_leaves_the_rest_of_the_diagnosis(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(error_shape, "find", broken)
    outputs = record.stored("tail_column_relu")
    report = diagnose(outputs["expected"], outputs["got"], atol=TOL, rtol=TOL)
    assert report["pattern"] == {"kind": "unknown", "error": "RuntimeError: out of memory"}
    assert report["worst"] and report["outside_tolerance"] > 0


def test_a_long_dimension_is_counted_in_buckets_that_still_hold_every_wrong_value(
        monkeypatch):
    monkeypatch.setattr(error_shape, "MAX_INDEX", 64)  # as a billion-element output would be
    expected = torch.relu(torch.randn(1000))
    got = expected.clone()
    got[990:] = -1.0
    pattern = find(expected, got, atol=TOL, rtol=TOL)
    assert pattern["kind"] == "tail"
    # Buckets of 16 indices: the range given holds the wrong ones (990-999), one bucket wide
    # at most beyond them, and ends at the last index.
    (first, last), = pattern["ranges"][0]["ranges"]
    assert first <= 990 and 990 - first < 16 and last == 999
