"""Out of memory on a device shared by several evaluations: a clear verdict, and nothing lost.

An evaluation's memory need is an estimate (gpu_runner/sharing.py), so one admitted beside
others may find the device full through no fault of its kernel. It then runs again with the
device's memory to itself before its verdict is given. The judge's own allocations failing is
out_of_memory too, never a harness error.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from evaluator import gate
from evaluator.runner import pool, sandbox
from evaluator.runner.sandbox import run_job

from . import problems as p
from .conftest import make_job

# The judge draws inputs for its own checks first (one get_inputs() call); the trials' draws
# after it find the device "full".
RELU_JUDGE_RUNS_OUT = p.RELU.replace('''def get_inputs():
    return [torch.randn(64, 33)]''', '''_calls = [0]

def get_inputs():
    _calls[0] += 1
    if _calls[0] > 1:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")
    return [torch.randn(64, 33)]''')

# Runs out of memory until a moment of the clock (the test's neighbour is gone by then).
RELU_FULL_UNTIL = '''
import time
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        if time.time() < {until}:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")
        return torch.relu(x)
'''

ALWAYS_FULL = RELU_FULL_UNTIL.replace("time.time() < {until}", "True")


def _shared(tmp_path: Path, **overrides) -> dict:
    return make_job(p.RELU, ALWAYS_FULL, **{"gate_dir": str(tmp_path / "gate"),
                                            "memory_need_bytes": 100,
                                            "device_memory_bytes": 1000, **overrides})


class Neighbour(threading.Thread):
    """Another evaluation's admission on the same device, held for `hold_s` or until ended."""

    def __init__(self, folder: Path, hold_s: float, inside: threading.Event) -> None:
        super().__init__()
        self.folder, self.hold_s, self.inside = folder, hold_s, inside
        self.ended = threading.Event()

    def run(self) -> None:
        with gate.admitted(self.folder, 100, 1000):
            self.inside.set()
            self.ended.wait(self.hold_s)

    def end(self) -> None:
        self.ended.set()
        self.join()


def _neighbour(folder: Path, hold_s: float, inside: threading.Event) -> Neighbour:
    neighbour = Neighbour(folder, hold_s, inside)
    neighbour.start()
    inside.wait(5)
    return neighbour


def test_the_judge_running_out_of_device_memory_is_out_of_memory_not_a_harness_error():
    result = run_job(make_job(RELU_JUDGE_RUNS_OUT, p.RELU.replace("class Model(",
                                                                  "class ModelNew(")))
    assert result["verdict"] == "out_of_memory", (result["verdict"], result["error"])
    assert "judge" in result["error"] and "6.00 GiB" in result["error"]


def test_out_of_memory_beside_another_evaluation_runs_again_alone_and_loses_nothing(
        tmp_path: Path):
    inside = threading.Event()
    neighbour = _neighbour(tmp_path / "gate", 8.0, inside)
    started = time.monotonic()
    source = RELU_FULL_UNTIL.format(until=time.time() + 5.0)
    result = run_job(_shared(tmp_path, candidate_source=source))
    neighbour.join()
    assert result["verdict"] == "correct", (result["verdict"], result["error"])
    sharing = result["environment"]["sharing"]
    assert sharing["run_again_alone"] is True
    assert sharing["first_run"]["verdict"] == "out_of_memory"
    # Alone: admitted only once the neighbour had left.
    assert time.monotonic() - started >= 8.0
    assert result["phases"]["admission_wait"] > 1.0
    # On inputs it has not seen: a kernel cannot run out of memory to meet them again.
    first_seed = sharing["first_run"]["seed"]
    assert result["seeds"]["server"] != first_seed
    assert result["seeds"]["earlier_runs"] == [first_seed]


def test_a_run_alone_waits_for_the_device_past_the_time_limit_and_has_its_whole_limit(
        tmp_path: Path):
    """The neighbour holds the device longer than the kernel's time limit: that wait, and the
    first run's time beside it, are not the kernel's, so the run alone still comes."""
    inside = threading.Event()
    neighbour = _neighbour(tmp_path / "gate", 14.0, inside)
    started = time.monotonic()
    source = RELU_FULL_UNTIL.format(until=time.time() + 12.0)
    result = run_job(_shared(tmp_path, candidate_source=source, time_limit_s=8))
    neighbour.join()
    assert result["verdict"] == "correct", (result["verdict"], result["error"])
    assert result["environment"]["sharing"]["run_again_alone"] is True
    assert time.monotonic() - started >= 14.0


def test_a_run_alone_whose_device_never_comes_free_keeps_the_first_verdict_and_says_why(
        tmp_path: Path, monkeypatch):
    monkeypatch.setattr(sandbox, "ALONE_WAIT_SLACK_S", 0.0)  # one slot: one time limit
    inside = threading.Event()
    neighbour = _neighbour(tmp_path / "gate", 30.0, inside)
    started = time.monotonic()
    result = run_job(_shared(tmp_path, time_limit_s=10, device_slots=1))
    took = time.monotonic() - started
    assert result["verdict"] == "out_of_memory"
    sharing = result["environment"]["sharing"]
    assert sharing["run_again_alone"] is False and "did not come free" in sharing["why"]
    assert took < 25, f"it waited past its bound: {took:.1f} s"
    neighbour.end()  # held past the bound: nothing to wait for now


def test_an_evaluation_that_needs_the_whole_device_ran_alone_and_is_not_run_twice(
        tmp_path: Path):
    result = run_job(_shared(tmp_path, memory_need_bytes=1000))
    assert result["verdict"] == "out_of_memory"
    assert "sharing" not in result["environment"]


def _record_runs(monkeypatch) -> list[dict]:
    """What each run of the evaluation handed its judge, and whether it started a spare."""
    runs: list[dict] = []
    send_job, refill = sandbox._send_job, pool.POOL.refill

    def sending(launch, job):
        runs.append({"profile_process": job["profile_process"], "spare": False})
        send_job(launch, job)

    def refilling(make):
        runs[-1]["spare"] = True
        refill(make)

    monkeypatch.setattr(sandbox, "_send_job", sending)
    monkeypatch.setattr(pool.POOL, "refill", refilling)
    return runs


def test_a_run_alone_has_no_profiling_process_and_starts_no_spare_beside_it(
        tmp_path: Path, monkeypatch):
    """With the device's memory to itself: on an H100, an honest 6 GiB-tensor kernel's judge,
    worker and profiling process together ran out of memory with no other evaluation beside."""
    runs = _record_runs(monkeypatch)
    result = run_job(_shared(tmp_path, profile_process=True, measure=True))
    assert result["verdict"] == "out_of_memory"
    assert runs == [{"profile_process": True, "spare": True},
                    {"profile_process": False, "spare": False}]


def test_one_that_needs_the_whole_device_but_ran_with_its_profiling_process_runs_again_alone(
        tmp_path: Path, monkeypatch):
    runs = _record_runs(monkeypatch)
    result = run_job(_shared(tmp_path, memory_need_bytes=1000, profile_process=True,
                             measure=True))
    assert result["verdict"] == "out_of_memory"
    assert result["environment"]["sharing"]["run_again_alone"] is True
    # Neither run started a spare: each had all the device.
    assert runs == [{"profile_process": True, "spare": False},
                    {"profile_process": False, "spare": False}]


def test_a_kernel_out_of_memory_alone_too_keeps_its_verdict_after_one_run_alone(
        tmp_path: Path):
    result = run_job(_shared(tmp_path))
    assert result["verdict"] == "out_of_memory"
    assert result["environment"]["sharing"]["first_run"]["verdict"] == "out_of_memory"
    assert gate._read_ledger(tmp_path / "gate") == {}, "both runs left the ledger"


def test_without_sharing_an_out_of_memory_runs_once(tmp_path: Path):
    result = run_job(make_job(p.RELU, ALWAYS_FULL))
    assert result["verdict"] == "out_of_memory"
    assert "sharing" not in result["environment"]


def test_on_a_device_of_its_own_an_out_of_memory_beside_its_profiling_process_runs_again(
        monkeypatch):
    """One evaluation per GPU still has its profiling process beside it, whose copy of the
    problem's tensors may be what the evaluation lacked."""
    runs = _record_runs(monkeypatch)
    result = run_job(make_job(p.RELU, ALWAYS_FULL, profile_process=True, measure=True))
    assert result["verdict"] == "out_of_memory"
    assert result["environment"]["sharing"]["run_again_alone"] is True
    assert runs == [{"profile_process": True, "spare": True},
                    {"profile_process": False, "spare": False}]


def test_a_device_whose_memory_is_unknown_admits_everyone_and_gives_no_run_alone(
        tmp_path: Path, monkeypatch):
    """Its ledger admits every evaluation at once (gate.admitted), so no run there is alone,
    and none holds the whole device: each still starts the next one's spare."""
    runs = _record_runs(monkeypatch)
    result = run_job(_shared(tmp_path, device_memory_bytes=0))
    assert result["verdict"] == "out_of_memory"
    assert "sharing" not in result["environment"]
    assert runs == [{"profile_process": False, "spare": True}]
