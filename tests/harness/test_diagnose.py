"""A failed trial's diagnosis (evaluator/judge/diagnose.py): the worst elements, NaN/inf
positions, shapes and dtypes explained, and the precision hints, checked on the CPU with real
torch (TF32 emulated by rounding the matmul operands to 10 mantissa bits)."""

from __future__ import annotations

import json

import torch

from evaluator.judge import exploits
from evaluator.judge.diagnose import (
    TF32_HINT,
    diagnose,
    recomputer,
    round_to_tf32,
    trial_diagnosis,
)
from evaluator.runner.sandbox import run_job

from . import problems as p
from .conftest import make_job

ATOL = RTOL = 1e-4


class _MatMul(torch.nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


class _LinearReLU(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(1024, 256)

    def forward(self, x):
        return torch.relu(self.linear(x))


def _matmul_problem(seed: int = 0):
    torch.manual_seed(seed)
    model = _MatMul()
    inputs = [torch.randn(128, 2048), torch.randn(2048, 128)]
    with torch.no_grad():
        expected = model(*inputs)
    return model, inputs, expected


def test_round_to_tf32_keeps_ten_mantissa_bits_rounding_to_nearest_even():
    x = torch.tensor([1 + 2**-10, 1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-11 + 2**-20, -2.5,
                      float("inf"), float("nan")])
    got = round_to_tf32(x)
    assert got[0] == 1 + 2**-10  # representable: unchanged
    assert got[1] == 1.0  # a tie goes to the even mantissa
    assert got[2] == 1 + 2**-9  # a tie, to even upwards
    assert got[3] == 1 + 2**-10  # above the tie: up
    assert got[4] == -2.5 and torch.isinf(got[5]) and torch.isnan(got[6])
    assert round_to_tf32(x, truncate=True)[3] == 1.0
    assert round_to_tf32(x.double()).dtype == torch.float64  # only fp32 is rounded


def test_a_matmul_on_tf32_rounded_inputs_fails_fp32_and_gets_the_tf32_hint():
    model, (a, b), expected = _matmul_problem()
    got = round_to_tf32(a) @ round_to_tf32(b)  # what tl.dot does by default
    assert (got - expected).abs().max() > 1e-3  # fails the fp32 tolerance
    report = trial_diagnosis(model, [a, b], expected, got, atol=ATOL, rtol=RTOL)
    assert report["precision_match"] == "tf32"
    assert TF32_HINT in report["hint"]
    assert 'input_precision="ieee"' in report["hint"] and "tl.dot" in report["hint"]
    assert report["precision"]["tf32"]["same_rounding"] is True
    assert report["precision_match_by"] == "same_rounding"
    json.dumps(report, allow_nan=False)  # stored as JSON (Postgres refuses NaN)


def test_a_truncating_tf32_kernel_on_a_linear_layer_gets_the_tf32_hint_too():
    torch.manual_seed(1)
    model = _LinearReLU().eval()
    x = torch.randn(64, 1024)
    with torch.no_grad():
        expected = model(x)
        w = model.linear.weight
        got = torch.relu(round_to_tf32(x, truncate=True) @ round_to_tf32(w, truncate=True).T
                         + model.linear.bias)
    report = trial_diagnosis(model, [x], expected, got, atol=ATOL, rtol=RTOL)
    assert report["precision_match"] == "tf32_truncated"
    assert TF32_HINT in report["hint"]


def test_fp16_arithmetic_gets_the_fp16_accumulation_hint_not_the_tf32_one():
    torch.manual_seed(2)
    model = _MatMul()
    a, b = torch.rand(128, 2048), torch.rand(2048, 128)  # positive: fp16 rounding adds up
    expected = a @ b
    got = (a.half() @ b.half()).float()
    report = trial_diagnosis(model, [a, b], expected, got, atol=ATOL, rtol=RTOL)
    assert report["precision_match"] == "fp16"
    assert report["hint"].startswith("The error is consistent with fp16 accumulation")
    assert "TF32" not in report["hint"]


def test_a_plain_bug_gets_no_precision_hint():
    model, (a, b), expected = _matmul_problem()
    got = expected * 1.01  # a scale: named by its pattern, the reference is not recomputed
    report = trial_diagnosis(model, [a, b], expected, got, atol=ATOL, rtol=RTOL)
    assert report["kind"] == "values" and report["pattern"]["kind"] == "scale"
    assert "hint" not in report and "precision" not in report
    # Noise spread everywhere, twenty times TF32's error: rounding-like in its pattern, so the
    # reference is recomputed, but no variant's error is that large.
    tf32_error = (round_to_tf32(a) @ round_to_tf32(b) - expected).std()
    torch.manual_seed(4)
    got = expected + torch.randn_like(expected) * 20 * tf32_error
    report = trial_diagnosis(model, [a, b], expected, got, atol=ATOL, rtol=RTOL)
    assert report["pattern"]["fits_precision"] is True
    assert "hint" not in report and "precision_match" not in report
    assert not any(m["matches"] for m in report["precision"].values())


def test_an_error_only_as_large_as_tf32s_gets_a_hedged_hint():
    model, (a, b), expected = _matmul_problem()
    tf32_error = round_to_tf32(a) @ round_to_tf32(b) - expected
    torch.manual_seed(3)
    got = expected + torch.randn_like(expected) * tf32_error.std()  # noise, not TF32's pattern
    report = trial_diagnosis(model, [a, b], expected, got, atol=ATOL, rtol=RTOL)
    assert report["precision_match"] == "tf32" and report["precision_match_by"] == "error_size"
    assert report["hint"].startswith("Maybe a precision issue")
    assert report["precision"]["tf32"]["same_rounding"] is False


def test_the_reference_is_recomputed_only_for_a_wrong_fp32_value():
    model, inputs, expected = _matmul_problem()
    calls: list[str] = []
    recompute = recomputer(model, inputs)

    def counting(name: str):
        calls.append(name)
        return recompute(name)

    nan = expected.clone()
    nan[0, 0] = float("nan")
    for got in (expected.clone(), expected[:64], expected.double(), nan):
        diagnose(expected, got, atol=ATOL, rtol=RTOL, reference_recompute=counting)
    assert calls == []
    # A constant offset is a bug by its pattern: nothing recomputed for it either.
    diagnose(expected, expected + 1e-2, atol=ATOL, rtol=RTOL, reference_recompute=counting)
    assert calls == []
    torch.manual_seed(5)
    noisy = expected + torch.randn_like(expected) * 1e-2
    diagnose(expected, noisy, atol=ATOL, rtol=RTOL, reference_recompute=counting)
    assert "tf32" in calls
    assert set(calls) <= {"tf32", "tf32_truncated", *exploits.PRECISION_VARIANTS}


def test_the_worst_elements_are_the_furthest_outside_the_tolerance_with_their_positions():
    expected = torch.zeros(4, 5)
    got = expected.clone()
    got[1, 2] = 0.5
    got[3, 4] = -2.0
    got[0, 1] = 0.25
    got[2, 0] = 1e-5  # within the tolerance: not listed
    report = diagnose(expected, got, atol=ATOL, rtol=RTOL)
    assert report["kind"] == "values"
    assert report["outside_tolerance"] == 3 and report["elements"] == 20
    assert [(w["index"], w["position"], w["expected"], w["got"]) for w in report["worst"]] == [
        (19, [3, 4], 0.0, -2.0), (7, [1, 2], 0.0, 0.5), (1, [0, 1], 0.0, 0.25)]
    assert report["worst"][0]["abs_diff"] == 2.0


def test_the_worst_elements_weigh_the_relative_tolerance_and_stop_at_five():
    expected = torch.tensor([1000.0, 1.0] + [0.0] * 10)
    got = expected.clone()
    got[0] += 0.05  # allowed: 1e-4 + 0.1
    got[1] += 0.04
    got[2:] = torch.arange(10, dtype=torch.float32)
    report = diagnose(expected, got, atol=ATOL, rtol=RTOL)
    assert len(report["worst"]) == 5
    assert [w["index"] for w in report["worst"]] == [11, 10, 9, 8, 7]
    # Index 0 is within its relative allowance (1e-4 + 0.1), index 1 is not, index 2 is equal.
    assert report["outside_tolerance"] == 10


def test_nan_and_inf_positions_are_listed_first_among_the_worst():
    expected = torch.ones(3, 4)
    got = expected.clone()
    got[0, 3] = float("nan")
    got[2, 1] = float("nan")
    got[1, 1] = float("inf")
    got[2, 2] = 5.0
    report = diagnose(expected, got, atol=ATOL, rtol=RTOL)
    assert report["kind"] == "nonfinite"
    bad = report["nonfinite"]
    assert (bad["nan"], bad["posinf"], bad["neginf"]) == (2, 1, 0)
    assert [p["position"] for p in bad["first"]] == [[0, 3], [1, 1], [2, 1]]
    assert [p["value"] for p in bad["first"]] == ["nan", "inf", "nan"]
    assert "2 NaN and 1 +inf in the output (first at (0, 3), (1, 1), (2, 1))" in report["hint"]
    assert {w["got"] for w in report["worst"][:3]} == {"nan", "inf"}
    assert report["worst"][3]["position"] == [2, 2]
    json.dumps(report, allow_nan=False)


def test_a_transposed_output_is_explained_as_transposed():
    expected = torch.arange(6.0).reshape(2, 3)
    report = diagnose(expected, expected.T.contiguous(), atol=ATOL, rtol=RTOL)
    assert report["kind"] == "transposed" and report["values_match"] is True
    assert "transposed" in report["hint"] and "(j, i)" in report["hint"]
    assert (report["expected_shape"], report["got_shape"]) == ([2, 3], [3, 2])
    wrong = diagnose(expected, torch.zeros(3, 2), atol=ATOL, rtol=RTOL)
    assert wrong["kind"] == "transposed" and wrong["values_match"] is False


def test_permuted_reshaped_and_broadcast_shapes_are_explained():
    expected = torch.randn(2, 3, 4)
    permuted = diagnose(expected, expected.permute(1, 0, 2).contiguous(), atol=ATOL, rtol=RTOL)
    assert permuted["kind"] == "permuted" and permuted["permutation"] == [1, 0, 2]
    reshaped = diagnose(expected, expected.reshape(6, 4), atol=ATOL, rtol=RTOL)
    assert reshaped["kind"] == "reshaped" and "(2, 3, 4)" in reshaped["hint"]
    keepdim = diagnose(expected.sum(-1, keepdim=True), expected.sum(-1), atol=ATOL, rtol=RTOL)
    assert keepdim["kind"] == "size_one_dims" and keepdim["values_match"] is True
    row = expected[:, :1, :]
    broadcast = diagnose(row.expand(2, 3, 4).contiguous(), row, atol=ATOL, rtol=RTOL)
    assert broadcast["kind"] == "broadcast" and broadcast["values_match"] is True
    assert "broadcasts to the expected (2, 3, 4)" in broadcast["hint"]
    too_big = diagnose(row, expected, atol=ATOL, rtol=RTOL)
    assert too_big["kind"] == "broadcast" and "broadcasts to the output's" in too_big["hint"]
    other = diagnose(torch.zeros(2, 3), torch.zeros(5, 7), atol=ATOL, rtol=RTOL)
    assert other["kind"] == "shape"


def test_a_wrong_dtype_is_explained_with_whether_the_values_pass_once_cast():
    expected = torch.randn(8, 8)
    report = diagnose(expected, expected.double(), atol=ATOL, rtol=RTOL)
    assert report["kind"] == "dtype"
    assert (report["got_dtype"], report["expected_dtype"]) == ("float64", "float32")
    assert report["values_match"] is True and "pass once cast" in report["hint"]
    half = diagnose(expected, expected.half(), atol=ATOL, rtol=RTOL)
    assert half["values_match"] is False
    assert "return a float32 tensor" in half["hint"] and "precision" in half["hint"]


def test_only_the_first_wrong_output_of_several_is_diagnosed():
    a, b = torch.ones(3), torch.zeros(2, 2)
    report = diagnose((a, b), (a.clone(), b.T.double()), atol=ATOL, rtol=RTOL)
    assert report["output"] == 1 and report["kind"] == "dtype"
    assert diagnose((a, b), (a,), atol=ATOL, rtol=RTOL)["kind"] == "outputs"
    assert diagnose((a, b), (a.clone(), b.clone()), atol=ATOL, rtol=RTOL) == {}


TF32_MATMUL = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(128, 1024), torch.randn(1024, 128)]


def get_init_inputs():
    return []
'''

TF32_MATMUL_KERNEL = '''
import torch
import torch.nn as nn


def tf32(t):
    bits = t.contiguous().view(torch.int32)
    bits = bits + (0x0FFF + ((bits >> 13) & 1))
    return (bits & -0x2000).view(torch.float32)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return tf32(a) @ tf32(b)  # TF32 tensor cores: operands to 10 mantissa bits
'''


def test_the_judge_attaches_the_tf32_hint_to_a_failed_trial():
    result = run_job(make_job(TF32_MATMUL, TF32_MATMUL_KERNEL))
    assert result["verdict"] == "incorrect", result["error"]
    trial = result["trials"][0]
    assert trial["passed"] is False
    diagnosis = trial["diagnosis"]
    assert diagnosis["precision_match"] == "tf32" and TF32_HINT in diagnosis["hint"]
    assert len(diagnosis["worst"]) == 5
    # The error's shape came first, and it fits rounding: the one pattern given the hint.
    assert diagnosis["pattern"]["kind"] == "rounding"
    assert diagnosis["pattern"]["fits_precision"] is True
    assert "diagnosis" in result["phases"]


def test_the_judge_explains_a_wrong_dtype_without_recomputing():
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_WRONG_DTYPE))
    assert result["verdict"] == "incorrect"
    diagnosis = result["trials"][0]["diagnosis"]
    assert diagnosis["kind"] == "dtype" and diagnosis["values_match"] is True
    assert "precision" not in diagnosis
