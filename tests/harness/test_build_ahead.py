"""A cold extension build on a shared device runs before its evaluation is admitted
(evaluator/runner/sandbox.py): a build holds the host a minute or more and no device memory,
so the memory its evaluation expects is not kept from other evaluations meanwhile. On an H100
(issue 41), builds of 53 to 74 s held a 6 GiB-tensor problem's 57.75 GiB each, one after
another, while smaller evaluations waited up to 185 s behind them.

The first tests run real processes (a real C++ build, half a minute on two cores; a CUDA one on
a GPU): only a real build shows that the cache entry is written while the device's memory is
still held by another evaluation, and that the evaluation then loads it without compiling."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from evaluator import gate
from evaluator.runner import buildcache
from evaluator.runner.results import with_build_ahead
from evaluator.runner.sandbox import builds_ahead, run_job

from . import problems as p
from .conftest import make_job


def _shared(tmp_path: Path, candidate: str, **overrides) -> dict:
    job = make_job(p.RELU, candidate, backend="cpp", build_dir=str(tmp_path / "builds"),
                   gate_dir=str(tmp_path / "gate"), memory_need_bytes=5,
                   device_memory_bytes=10)
    return {**job, **overrides}


def _hold_the_device(tmp_path: Path, need: int, release: threading.Event) -> threading.Thread:
    """Another evaluation, admitted with `need` of the device's 10 until `release` is set."""
    held = threading.Event()

    def neighbour() -> None:
        with gate.admitted(tmp_path / "gate", need, 10):
            held.set()
            release.wait(400)

    holder = threading.Thread(target=neighbour)
    holder.start()
    held.wait(10)
    return holder


def _built_while_the_device_is_held(tmp_path: Path, job: dict) -> tuple[bool, dict]:
    """Runs `job` while another evaluation holds 9 of the device's 10 (the build's byte fits
    beside it, the evaluation's 5 do not) until its build is in the cache and the evaluation
    waits for memory: whether both came before the memory was let go, and the result."""
    entry = buildcache.entry_for(job)
    release, evaluation_waits = threading.Event(), threading.Event()

    def on_event(event: dict) -> None:
        if event.get("phase") == "waiting_for_memory" and entry.is_dir():
            evaluation_waits.set()

    holder = _hold_the_device(tmp_path, 9, release)
    try:
        with ThreadPoolExecutor(1) as threads:
            running = threads.submit(run_job, job, on_event=on_event)
            deadline = time.monotonic() + 200
            while (not evaluation_waits.is_set() and not running.done()
                   and time.monotonic() < deadline):
                time.sleep(0.5)
            built_while_held = evaluation_waits.is_set()
            release.set()
            result = running.result(timeout=300)
    finally:
        release.set()
        holder.join(10)
    return built_while_held, result


def _loaded_what_was_built_ahead(built_while_held: bool, result: dict) -> None:
    assert built_while_held, result["error"] + result["compile_log"]
    assert result["verdict"] == "correct", result["error"] + result["compile_log"]
    assert result["compile"]["cache_hit"] is True and result["compile"]["compiled"] is False
    assert result["phases"]["build_ahead"] > 0
    assert result["phases"]["admission_wait"] > 0
    assert result["environment"]["build_ahead"]["verdict"] == "compiled"


def test_a_cold_build_runs_while_the_devices_memory_is_held_and_the_evaluation_loads_it(
        tmp_path: Path):
    job = _shared(tmp_path, p.CPP_RELU, time_limit_s=300)
    _loaded_what_was_built_ahead(*_built_while_the_device_is_held(tmp_path, job))


@pytest.mark.gpu
def test_a_cold_cuda_build_on_a_shared_gpu_runs_before_its_evaluation_is_admitted(
        tmp_path: Path):
    """On the GPU, with nvcc: what the sharing bench's cold CUDA kernels go through."""
    job = _shared(tmp_path, p.CUDA_RELU, backend="cuda", device="cuda", time_limit_s=300)
    _loaded_what_was_built_ahead(*_built_while_the_device_is_held(tmp_path, job))


def test_a_build_that_fails_ahead_is_the_verdict_without_waiting_for_the_evaluations_memory(
        tmp_path: Path):
    job = _shared(tmp_path, p.CPP_BAD_FLAG, time_limit_s=120)
    release = threading.Event()
    holder = _hold_the_device(tmp_path, 9, release)  # room for the build, not the evaluation
    timer = threading.Timer(30, release.set)
    timer.start()
    try:
        result = run_job(job)
    finally:
        timer.cancel()
        release.set()
        holder.join(10)
    assert result["verdict"] == "compile_error", result["error"]
    assert "fno-such-flag-kbsite" in result["compile_log"]
    assert "admission_wait" not in result["phases"]
    assert result["phases"]["build_ahead"] > 0
    assert result["environment"]["build_ahead"]["cache"] == "unfinished"
    assert not buildcache.entry_for(job).exists()


# Loads slowly (a build's minute, shortened), naming load_inline as a source that builds does.
SLOW_TO_LOAD = p.RELU.replace("class Model(", "class ModelNew(").replace(
    "import torch.nn as nn", """import torch.nn as nn
import time
time.sleep(6)  # as load_inline would""")


def test_a_run_alone_waits_for_a_build_ahead_as_for_any_evaluation(tmp_path: Path):
    """The build runs the candidate's code: a run alone (the device's memory to itself) must
    not start beside it."""
    job = _shared(tmp_path, SLOW_TO_LOAD, backend="torch", time_limit_s=60)
    assert builds_ahead(job)
    building = threading.Event()

    def on_event(event: dict) -> None:
        if event.get("phase") == "compiling":
            building.set()

    with ThreadPoolExecutor(1) as threads:
        running = threads.submit(run_job, job, on_event=on_event)
        assert building.wait(60), "the build never began"
        with pytest.raises(TimeoutError), gate.admitted(
                tmp_path / "gate", 10, 10, alone=True, give_up=True, max_wait_s=2, poll_s=0.05):
            pass
        result = running.result(timeout=120)
    assert result["verdict"] == "correct", result["error"]
    assert result["environment"]["build_ahead"]["verdict"] == "compiled"


def test_only_an_uncached_extension_build_on_a_shared_device_is_built_ahead(tmp_path: Path):
    job = _shared(tmp_path, p.CPP_RELU)
    assert builds_ahead(job)
    # Submitted as PyTorch, but building an extension all the same.
    assert builds_ahead({**job, "backend": "torch"})
    assert not builds_ahead({**job, "gate_dir": None})  # a device of its own: nothing waits
    assert not builds_ahead({**job, "device_memory_bytes": 0})  # its memory unknown: likewise
    assert not builds_ahead({**job, "build_dir": None})  # no cache to build into
    assert not builds_ahead({**job, "mode": "compile"})
    assert not builds_ahead(_shared(tmp_path, p.TRITON_RELU, backend="triton"))
    buildcache.entry_for(job).mkdir(parents=True)  # already built
    assert not builds_ahead(job)


def test_what_the_compiler_said_ahead_stays_in_the_evaluations_compile_log():
    built = {"verdict": "compiled", "compile_log": "warning: unused variable", "error": "",
             "phases": {"total": 61.5},
             "environment": {"sandbox": {"build_cache": {"outcome": "kept"}}}}
    result = with_build_ahead({"verdict": "correct", "compile_log": "loaded", "phases": {}},
                               built)
    assert result["compile_log"] == "warning: unused variable\nloaded"
    assert result["phases"]["build_ahead"] == 61.5
    assert result["environment"]["build_ahead"] == {"verdict": "compiled", "error": "",
                                                    "cache": "kept"}
    # Said once, not twice, where the evaluation's own log already has it.
    again = with_build_ahead(dict(result), built)
    assert again["compile_log"].count("unused variable") == 1


# Builds part of an extension (a file in its build folder), then never finishes.
HALF_BUILT_THEN_HANGS = p.RELU.replace("class Model(", "class ModelNew(").replace(
    "import torch.nn as nn", """import torch.nn as nn
import os, pathlib, time
# load_inline never comes: the build stops halfway, as a crash or a hang would leave it
folder = pathlib.Path(os.environ["TORCH_EXTENSIONS_DIR"])
folder.mkdir(parents=True, exist_ok=True)
(folder / "half_built.o").write_bytes(b"0" * 1024)
print("half built", flush=True)
time.sleep(120)""")


def test_a_build_cut_short_ahead_leaves_nothing_for_the_evaluation_to_load_as_cached(
        tmp_path: Path):
    """Its half-built entry would make the evaluation's load count as a cached one (held on the
    device while it builds the rest); the evaluation starts from nothing instead."""
    job = _shared(tmp_path, HALF_BUILT_THEN_HANGS, backend="torch", time_limit_s=20)
    assert builds_ahead(job)
    result = run_job(job)
    ahead = result["environment"]["build_ahead"]
    assert ahead["verdict"] == "timeout", ahead
    assert "compil" in ahead["error"], ahead  # it ended while loading, the half build made
    assert ahead["cache"] == "unfinished"
    assert result["verdict"] == "timeout", result["error"]
    assert result["environment"]["sandbox"]["build_cache"]["hit"] is False
