"""The compiled backends that run on the CPU: cpp (load_inline, cached by source hash) and
triton (through its interpreter). One C++ source is compiled once per session and shared through
the build cache, because a torch extension takes most of a minute to compile."""

from __future__ import annotations

import pytest

from evaluator.runner.sandbox import run_job

from . import problems as p
from .conftest import make_job


@pytest.fixture(scope="module")
def cpp_first_run(build_dir: str) -> dict:
    return run_job(make_job(p.RELU, p.CPP_RELU, backend="cpp", build_dir=build_dir,
                            time_limit_s=300, measure=True))


def test_a_right_cpp_kernel_compiles_and_is_judged_correct(cpp_first_run: dict):
    result = cpp_first_run
    assert result["verdict"] == "correct", result["error"] + result["compile_log"]
    assert result["compile"]["compiled"] is True
    assert result["compile"]["cache_hit"] is False
    assert result["phases"]["compile"] > 0
    assert result["candidate"]["n"] >= 5 and result["speedup"] > 0
    assert [f for f in result["flags"] if f != "timing_unconfirmed"] == []


def test_re_evaluating_a_compiled_cpp_kernel_hits_the_cache_and_spends_no_time_compiling(
    cpp_first_run: dict, build_dir: str
):
    assert cpp_first_run["verdict"] == "correct"
    again = run_job(make_job(p.RELU, p.CPP_RELU, backend="cpp", build_dir=build_dir, seed=7))
    assert again["verdict"] == "correct", again["error"]
    assert again["compile"]["cache_hit"] is True
    assert again["compile"]["compiled"] is False
    assert again["phases"]["compile"] == 0.0


def test_compile_mode_builds_ahead_without_running_the_kernel(cpp_first_run: dict,
                                                             build_dir: str):
    result = run_job(make_job(p.RELU, p.CPP_RELU, backend="cpp", build_dir=build_dir,
                              mode="compile"))
    assert result["verdict"] == "compiled", result["error"]
    assert result["trials"] == [] and result["compile"]["cache_hit"] is True


def test_a_cpp_kernel_for_another_problem_is_judged_incorrect(cpp_first_run: dict, build_dir: str):
    # The same (cached) ReLU extension held against LeakyReLU: wrong on every negative input.
    result = run_job(make_job(p.LEAKY_RELU, p.CPP_RELU, backend="cpp", build_dir=build_dir))
    assert result["verdict"] == "incorrect"
    assert result["compile"]["cache_hit"] is True


def test_a_cpp_build_failure_is_a_compile_error_with_the_compiler_output(build_dir: str):
    result = run_job(make_job(p.RELU, p.CPP_BAD_FLAG, backend="cpp", build_dir=build_dir))
    assert result["verdict"] == "compile_error"
    assert "kb_test_relu" in result["error"] or "Error building" in result["error"]
    assert "fno-such-flag-kbsite" in result["compile_log"]


def test_a_right_triton_kernel_is_correct_through_the_interpreter_on_the_cpu():
    result = run_job(make_job(p.RELU, p.TRITON_RELU, backend="triton", measure=True,
                              timing={"warmup": 1, "min_reps": 3, "max_reps": 5, "sets": 2}))
    assert result["verdict"] == "correct", result["error"] + result["traceback"]
    assert result["candidate"]["n"] >= 3


def test_a_triton_kernel_that_skips_the_tail_is_incorrect():
    result = run_job(make_job(p.RELU, p.TRITON_RELU_MISSES_TAIL, backend="triton"))
    assert result["verdict"] == "incorrect", result["error"] + result["traceback"]
