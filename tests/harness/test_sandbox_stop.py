"""A runner stops an evaluation through run_job's `stop` (its submission cancelled): the
judge's whole process tree goes within a second or two, wherever the evaluation is, and what
it held (its admission to the device, its build slot) goes back. Real processes: only a real
sandboxed tree shows that nothing of it outlives the request."""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evaluator import gate
from evaluator.runner.sandbox import run_job

from . import problems as p
from .conftest import make_job

# Correct, but its model takes a minute to build: the evaluation is mid-load when stopped.
SLOW_LOAD = '''
import time
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        time.sleep(60)

    def forward(self, x):
        return torch.relu(x)
'''


def _ours() -> set[int]:
    """The processes this test process started, and theirs, still alive (not another suite's
    on the same host; the test compares them before and after, as the session's own servers
    are among them)."""
    from evaluator.process import process_tree, stat_fields

    return {pid for pid in process_tree(os.getpid())
            if (fields := stat_fields(pid)) and fields[0] not in "ZX"}


def _stop_after(stop: threading.Event, job: dict, seconds: float) -> tuple[dict, float]:
    """run_job in a thread, stopped `seconds` after it starts: its result, and how long it
    took to return once asked."""
    with ThreadPoolExecutor(1) as threads:
        running = threads.submit(run_job, job, stop=stop)
        time.sleep(seconds)
        asked = time.monotonic()
        stop.set()
        result = running.result(timeout=30)
        return result, time.monotonic() - asked


def test_a_stopped_evaluation_ends_within_seconds_and_leaves_no_process(tmp_path: Path):
    before = _ours()
    result, took = _stop_after(threading.Event(), make_job(p.RELU, SLOW_LOAD, time_limit_s=120),
                               seconds=6)
    assert took < 5, took
    assert result["verdict"] == "harness_error"
    assert "stopped by its runner" in result["error"]
    # The candidate's module sleeps in a process of the sandbox: gone with the tree.
    left = _ours() - before
    assert not left, [Path(f"/proc/{pid}/cmdline").read_bytes()[:200] for pid in left]


def test_a_stop_while_waiting_for_the_device_gives_its_place_back(tmp_path: Path):
    """A neighbour holds 9 of the device's 10; this evaluation needs 5 and waits: stopped, it
    returns without starting, and the ledger no longer counts it."""
    gates = tmp_path / "gate"
    release, held = threading.Event(), threading.Event()

    def neighbour() -> None:
        with gate.admitted(gates, 9, 10):
            held.set()
            release.wait(60)

    holder = threading.Thread(target=neighbour)
    holder.start()
    try:
        assert held.wait(10)
        job = make_job(p.RELU, SLOW_LOAD, gate_dir=str(gates), memory_need_bytes=5,
                       device_memory_bytes=10)
        result, took = _stop_after(threading.Event(), job, seconds=3)
        assert took < 5, took
        assert "stopped by its runner" in result["error"]
        ledger = json.loads((gates / gate.LEDGER).read_text())
        assert list(ledger.values()) == [9], ledger  # the neighbour's alone
    finally:
        release.set()
        holder.join(10)
