"""In-process tests of the harness's building blocks (no sandbox, fast)."""

from __future__ import annotations

import io
import math
import os
import struct
import sys
import time

import pytest
import torch

from evaluator.config import DEFAULT_TIMING, JobError, normalize_job
from evaluator.errors import clean_text, is_oom, signal_name, truncate
from evaluator.judge.compare import compare_outputs
from evaluator.loading import (
    build_model,
    derive_seed,
    make_inputs,
    module_from_source,
)
from evaluator.process import LogCapture, resolve_limits
from evaluator.protocol import Channel, ProtocolError
from evaluator.runner.results import json_safe
from evaluator.runner.sandbox import scrubbed_env
from evaluator.timing import median_rel_err, summarize, time_callable

from . import problems as p


def _cmp(expected, actual, atol=1e-4, rtol=1e-4):
    return compare_outputs(expected, actual, atol=atol, rtol=rtol, expected_device="cpu")


def test_compare_accepts_values_within_atol_plus_rtol_times_expected():
    exp = torch.tensor([1.0, 100.0, -3.0])
    assert _cmp(exp, exp + torch.tensor([5e-5, 5e-3, 0.0]))["passed"]
    assert not _cmp(exp, exp + torch.tensor([5e-4, 0.0, 0.0]))["passed"]


def test_compare_rejects_nan_and_inf_whatever_the_tolerance():
    exp = torch.zeros(4)
    for bad in (float("nan"), float("inf"), -float("inf")):
        act = exp.clone()
        act[2] = bad
        res = _cmp(exp, act, atol=1e30, rtol=1e30)
        assert not res["passed"] and "NaN/inf" in res["reason"]


def test_compare_requires_exact_shape_dtype_count_and_integer_equality():
    exp = torch.ones(2, 3)
    assert "shape" in _cmp(exp, torch.ones(3, 2))["reason"]
    assert "dtype" in _cmp(exp, torch.ones(2, 3, dtype=torch.float64))["reason"]
    assert "outputs" in _cmp((exp, exp), (exp,))["reason"]
    ints = torch.tensor([1, 2, 3])
    assert _cmp(ints, ints.clone())["passed"]
    assert not _cmp(ints, torch.tensor([1, 2, 4]), atol=10, rtol=10)["passed"]


def test_compare_checks_the_device_the_worker_reported():
    exp = torch.ones(3)
    act = torch.ones(3)
    act._kb_device = "cuda:0"
    assert "device" in _cmp(exp, act)["reason"]


def test_compare_handles_tuples_empty_tensors_and_reports_differences():
    exp = (torch.zeros(0), torch.tensor([1.0, 2.0]))
    res = _cmp(exp, (torch.zeros(0), torch.tensor([1.0, 2.00001])))
    assert res["passed"] and res["max_abs_diff"] == pytest.approx(1e-5, rel=1e-2)


def test_derived_seeds_are_stable_distinct_and_independent_of_each_other():
    assert derive_seed(5, "trial", 1) == derive_seed(5, "trial", 1)
    seeds = {derive_seed(5, "trial", k) for k in range(10)} | {derive_seed(5, "init")}
    assert len(seeds) == 11
    assert derive_seed(5, "trial", 1) != derive_seed(6, "trial", 1)
    assert all(0 <= s < 2**63 for s in seeds)


def test_inputs_are_reproducible_from_a_seed_and_integers_keep_their_dtype():
    ref = module_from_source(p.GATHER_ROWS, "kb_test_gather")
    a = make_inputs(ref, 11, "cpu", "fp16")
    b = make_inputs(ref, 11, "cpu", "fp16")
    c = make_inputs(ref, 12, "cpu", "fp16")
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])
    assert a[0].dtype == torch.float16 and a[1].dtype == torch.int64


def test_model_and_modelnew_built_with_the_same_seed_share_their_weights():
    ref = module_from_source(p.LINEAR_RELU, "kb_test_ref")
    cand = module_from_source(p.LINEAR_RELU_RIGHT, "kb_test_cand")
    m1 = build_model(ref.Model, [16], 99, "cpu", "fp32")
    m2 = build_model(cand.ModelNew, [16], 99, "cpu", "fp32")
    assert torch.equal(m1.linear.weight, m2.linear.weight)
    assert not m1.training and not m2.training


def test_summarize_reports_the_usual_statistics():
    stats = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert stats["median_ms"] == 3.0 and stats["min_ms"] == 1.0 and stats["max_ms"] == 100.0
    assert stats["n"] == 5 and stats["mean_ms"] == 22.0
    assert summarize([]) is None


def test_the_median_error_is_robust_to_outliers_and_shrinks_with_more_samples():
    steady = [1.0 + 0.001 * (i % 3) for i in range(30)]
    assert median_rel_err(steady + [50.0]) < 0.01
    assert median_rel_err(steady[:10]) > median_rel_err(steady)
    assert math.isinf(median_rel_err([1.0]))


def test_timing_stops_when_the_median_is_stable_and_rotates_input_sets():
    seen: list[int] = []

    def fn(x):
        seen.append(int(x))
        time.sleep(0.001)

    sets = [[torch.tensor(i)] for i in range(3)]
    out = time_callable(fn, sets, "cpu", warmup=2, min_reps=5, max_reps=500,
                        target_rel_err=0.05, max_seconds=5)
    assert out["stopped"] == "stable" and 5 <= out["n"] < 500
    assert set(seen) == {0, 1, 2}
    assert len(out["samples_ms"]) == len(out["wall_ms"]) == out["n"]
    assert all(s >= 1.0 for s in out["samples_ms"])


def test_timing_respects_its_caps():
    out = time_callable(lambda: time.sleep(0.02), [[]], "cpu", warmup=0, min_reps=100,
                        max_reps=1000, target_rel_err=0.0, max_seconds=0.2)
    assert out["stopped"] == "max_seconds" and out["n"] < 20
    out = time_callable(lambda: None, [[]], "cpu", warmup=0, min_reps=100, max_reps=7,
                        target_rel_err=0.0)
    assert out["stopped"] == "max_reps" and out["n"] == 7


def test_the_channel_carries_tensors_of_every_dtype_and_nested_values():
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()
    mem_a, mem_b = os.memfd_create("a"), os.memfd_create("b")
    left = Channel(b_r, a_w, mem_a, mem_b)
    right = Channel(a_r, b_w, mem_b, mem_a)
    value = {
        "floats": torch.randn(3, 4),
        "half": torch.randn(5).half(),
        "bf16": torch.randn(2, 2).bfloat16(),
        "ints": (torch.arange(6).reshape(2, 3), 7, None, "x"),
        "bools": [torch.tensor([True, False])],
        "empty": torch.zeros(0, 3),
        "scalar": torch.tensor(2.5),
        "noncontig": torch.arange(12.0).reshape(3, 4).t(),
    }
    left.send({"cmd": "hello"}, value)
    header, got = right.recv(timeout=5)
    assert header["cmd"] == "hello"
    for key in ("floats", "half", "bf16", "empty", "scalar", "noncontig"):
        assert got[key].dtype == value[key].dtype and torch.equal(got[key], value[key])
    assert torch.equal(got["ints"][0], value["ints"][0]) and got["ints"][1:] == (7, None, "x")
    assert torch.equal(got["bools"][0], value["bools"][0])
    # The receiver gets its own copy, not a view of the sender's memory.
    assert got["floats"].data_ptr() != value["floats"].data_ptr()
    for fd in (a_r, a_w, b_r, b_w, mem_a, mem_b):
        os.close(fd)


def test_the_channel_refuses_a_tensor_whose_bytes_are_missing():
    a_r, a_w = os.pipe()
    mem = os.memfd_create("m")
    sender = Channel(-1, a_w, mem, mem)
    receiver = Channel(a_r, -1, mem, mem)
    sender.send({}, torch.ones(1000))
    os.ftruncate(mem, 10)  # a hostile sender shrinks its buffer after announcing a tensor
    with pytest.raises(ProtocolError):
        receiver.recv(timeout=5)
    for fd in (a_r, a_w, mem):
        os.close(fd)


@pytest.mark.parametrize("value", [{"__dict__": [1]}, {"__tuple__": 5}, {"__dict__": {"a": {}}},
                                   {"__tuple__": [{"__tensor__": True}]}])
def test_the_channel_refuses_a_malformed_value_as_a_protocol_error(value):
    """The candidate's process writes what it likes into its end: any frame the judge cannot
    decode is the worker's malformed reply, never an error of the judge's own."""
    a_r, a_w = os.pipe()
    mem = os.memfd_create("m")
    sender = Channel(-1, a_w, mem, mem)
    receiver = Channel(a_r, -1, mem, mem)
    sender._frame({"ok": True, "value": value})
    with pytest.raises(ProtocolError):
        receiver.recv(timeout=5)
    deep = b"[" * 30_000 + b"]" * 30_000  # within a pipe's buffer
    os.write(a_w, struct.pack("<I", len(deep)) + deep)
    with pytest.raises(ProtocolError):
        receiver.recv(timeout=5)
    for fd in (a_r, a_w, mem):
        os.close(fd)


def test_log_capture_keeps_head_and_tail_with_a_marker():
    stream = io.BytesIO(b"A" * 1000 + b"\x1b[1mB\x1b[0m" * 10 + b"Z" * 1000)
    text = LogCapture(stream, 200).text()
    assert text.startswith("A" * 100) and text.endswith("Z" * 100)
    assert "bytes truncated" in text and "\x1b" not in text


def test_text_helpers():
    assert clean_text("\x1b[31mred\x1b[0m\x07") == "red"
    assert len(truncate("x" * 10000, 100)) < 200 and "truncated" in truncate("x" * 10000, 100)
    assert signal_name(-11) == "SIGSEGV" and signal_name(139) == "SIGSEGV"
    assert signal_name(0) is None and signal_name(3) is None
    assert is_oom(MemoryError()) and is_oom(RuntimeError("CUDA out of memory. Tried ..."))
    assert not is_oom(ValueError("x"))


def test_json_safe_makes_results_storable():
    assert json_safe({"a": float("nan"), "b": (1, float("inf")), "c": torch.float32}) == {
        "a": None, "b": [1, None], "c": "torch.float32"}


def test_job_defaults_follow_the_design():
    job = normalize_job({"reference_source": "", "candidate_source": "", "precision": "bf16"})
    assert job["atol"] == job["rtol"] == 1e-2
    assert normalize_job({"reference_source": "", "candidate_source": ""})["atol"] == 1e-4
    assert job["n_trials"] == 5 and job["timing"]["warmup"] == DEFAULT_TIMING["warmup"]
    assert isinstance(job["seed"], int)
    with pytest.raises(JobError):
        normalize_job({"reference_source": "", "candidate_source": "", "backend": "cuda",
                       "device": "cpu"})


def test_the_sandbox_environment_keeps_only_what_the_harness_needs(monkeypatch, tmp_path):
    for name in ("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "AWS_X"):
        monkeypatch.setenv(name, "secret")
    job = normalize_job({"reference_source": "", "candidate_source": "", "backend": "triton"})
    env = scrubbed_env(job, tmp_path)
    assert not {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE",
                "AWS_X"} & set(env)
    assert env["HOME"] == str(tmp_path) and env["TRITON_INTERPRET"] == "1"
    assert env["PYTHONPATH"] and sys.executable  # the harness stays importable


def test_address_space_limits_apply_on_the_cpu_but_never_on_a_gpu():
    assert resolve_limits({"address_space_mb": 1024}, on_gpu=False)["RLIMIT_AS"] == 1 << 30
    assert resolve_limits({"address_space_mb": 1024}, on_gpu=True)["RLIMIT_AS"] is None
    assert resolve_limits({"address_space_mb": "auto"}, on_gpu=True)["RLIMIT_AS"] is None
    assert resolve_limits({"core_dumps": False}, on_gpu=False)["RLIMIT_CORE"] == 0


def test_a_limit_set_wrong_in_the_runners_environment_is_named_not_a_bare_traceback(monkeypatch):
    from evaluator.config import _env_limit

    for good, want in (("512", 512), ("auto", "auto"), ("none", None), ("", "auto")):
        monkeypatch.setenv("KB_SANDBOX_MEMORY_MB", good)
        assert _env_limit("KB_SANDBOX_MEMORY_MB", "auto") == want
    for bad in ("4G", "-1", "0", "1.5"):
        monkeypatch.setenv("KB_SANDBOX_MEMORY_MB", bad)
        with pytest.raises(ValueError, match="KB_SANDBOX_MEMORY_MB=.*expected a number of MiB"):
            _env_limit("KB_SANDBOX_MEMORY_MB", "auto")
