"""Judges started ahead (evaluator/runner/pool.py): a spare serves exactly one evaluation, only
one of its own kind, leaks nothing to the next, and dies with its runner."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluator import config
from evaluator.judge import spare, workers
from evaluator.judge.judge import Judge
from evaluator.runner import pool
from evaluator.runner.sandbox import run_job

from . import problems as p
from .conftest import make_job

RIGHT = p.RELU.replace("class Model(", "class ModelNew(")

# Leaves traces everywhere a later evaluation could look: its folder, the interpreter's modules,
# torch, the environment. The next candidate fails if it sees any of them.
LEAVES_TRACES = RIGHT.replace("import torch.nn as nn", """import torch.nn as nn
import os, sys
open("trace.txt", "w").write("x")
torch._kb_trace = 1
sys.modules["kb_trace"] = sys
os.environ["KB_TRACE"] = "1"
""")
CHECKS_TRACES = RIGHT.replace("import torch.nn as nn", """import torch.nn as nn
import os, sys
assert not os.path.exists("trace.txt"), "a file of the previous evaluation"
assert not hasattr(torch, "_kb_trace"), "torch state of the previous evaluation"
assert "kb_trace" not in sys.modules, "a module of the previous evaluation"
assert "KB_TRACE" not in os.environ, "the environment of the previous evaluation"
""")


@pytest.fixture
def prestart() -> Iterator[None]:
    pool.enable(True)
    try:
        yield
    finally:
        pool.enable(False)  # kills the spare left over


def _spare() -> pool.Launch:
    spare = pool.POOL.spare
    assert spare is not None, "a spare should be waiting for the next job"
    assert spare.ready(timeout=120), "the spare never got ready"
    return spare


def test_the_next_evaluation_takes_the_spare_and_starts_faster(prestart):
    first = run_job(make_job(p.RELU, RIGHT))
    assert first["verdict"] == "correct", first["error"]
    assert first["environment"]["sandbox"]["prestarted"] is False
    spare = _spare()
    second = run_job(make_job(p.RELU, RIGHT))
    assert second["verdict"] == "correct", second["error"]
    sandbox_env = second["environment"]["sandbox"]
    assert sandbox_env["prestarted"] is True and sandbox_env["prestarted_ready"] is True
    assert not spare.alive(), "a spare serves one evaluation and is killed after it"
    # Interpreters, torch and the worker were ready: what is left is loading the reference.
    assert second["phases"]["startup"] < first["phases"]["startup"] / 2, (
        first["phases"], second["phases"])
    # The judge found its worker started and ready (the one the spare made ahead).
    assert second["phases"]["worker_start"] < first["phases"]["worker_start"], (
        first["phases"], second["phases"])
    # A new sandboxed worker for every evaluation: each in its own pid namespace (so the pids
    # it reports are its namespace's), and, under a root runner, under a uid of its own.
    assert first["environment"]["sandbox"]["pid_namespace"] is True
    if os.geteuid() == 0:
        assert (first["environment"]["sandbox"]["candidate_uid"]
                != second["environment"]["sandbox"]["candidate_uid"])


def test_nothing_of_one_evaluation_reaches_the_next(prestart):
    first = run_job(make_job(p.RELU, LEAVES_TRACES))
    assert first["verdict"] == "correct", first["error"]
    _spare()
    second = run_job(make_job(p.RELU, CHECKS_TRACES))
    assert second["environment"]["sandbox"]["prestarted"] is True
    assert second["verdict"] == "correct", second["error"]


def test_a_spare_is_used_only_for_a_job_of_its_own_kind(prestart, tmp_path):
    run_job(make_job(p.RELU, RIGHT))
    spare = _spare()
    other = run_job(make_job(p.RELU, RIGHT, build_dir=str(tmp_path)))
    assert other["verdict"] == "correct", other["error"]
    assert other["environment"]["sandbox"]["prestarted"] is False
    assert not spare.alive(), "the unsuitable spare is discarded, not left running"


def test_a_dead_spare_is_replaced_not_used(prestart):
    run_job(make_job(p.RELU, RIGHT))
    spare = _spare()
    spare.kill_group()
    spare.proc.wait(timeout=10)
    result = run_job(make_job(p.RELU, RIGHT))
    assert result["verdict"] == "correct", result["error"]
    assert result["environment"]["sandbox"]["prestarted"] is False


def test_clearing_the_pool_kills_the_spare_and_removes_its_folder(prestart):
    run_job(make_job(p.RELU, RIGHT))
    spare = _spare()
    pids = [spare.proc.pid]
    workdir = spare.workdir
    pool.POOL.clear()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{q}") for q in pids):
        time.sleep(0.05)
    assert not spare.alive()
    assert not workdir.exists()


def _group_states(pgid: int) -> set[str]:
    """The states of the processes of a process group ('T': stopped)."""
    states = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                states.add(fields[0])
    return states


def test_on_the_cpu_the_spare_is_stopped_while_the_evaluation_is_timed_and_only_then(prestart):
    states: dict[str, set[str]] = {}

    def on_event(event: dict) -> None:
        spare = pool.POOL.spare
        if spare is None or event.get("type") != "phase":
            return
        deadline = time.monotonic() + 2  # SIGSTOP takes effect asynchronously
        while True:
            states[event["phase"]] = _group_states(spare.proc.pid)
            if event["phase"] == "timing" and states["timing"] == {"T"}:
                break
            if event["phase"] == "profiling" and "T" not in states["profiling"]:
                break
            if event["phase"] not in ("timing", "profiling"):
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)

    result = run_job(make_job(p.RELU, RIGHT, measure=True), on_event=on_event)
    assert result["verdict"] == "correct", result["error"]
    # Stopped, every process of it: no cycles taken from the cores being timed.
    assert states.get("timing") == {"T"}, states
    assert "T" not in states.get("checking", {"T"}), states
    # Continued once the timed calls are done: it gets ready during the untimed checks.
    assert "T" not in states.get("profiling", {"T"}), states
    spare = _spare()  # running again, and ready for the next job
    assert "T" not in _group_states(spare.proc.pid)


def test_a_spare_with_a_profiling_process_and_jobs_without_one_serve_each_other(prestart):
    """Real processes: on an H100, the spare started beside a 6 GiB-tensor problem's evaluation
    (no profiling process: its copy of the tensors would not fit) was of that kind, so the next
    small problem's job discarded it and started its own (+5 s of warm latency). The spare is
    prepared for the runner's usual next job instead, and one with a profiling process serves a
    job without one too."""
    first = run_job(make_job(p.RELU, RIGHT, profile_process=False, spare_profile_process=True))
    assert first["verdict"] == "correct", first["error"]
    _spare()
    with_profiler = run_job(make_job(p.RELU, RIGHT, profile_process=True, measure=True))
    assert with_profiler["verdict"] == "correct", with_profiler["error"]
    assert with_profiler["environment"]["sandbox"]["prestarted"] is True
    _spare()
    without = run_job(make_job(p.RELU, RIGHT, profile_process=False, measure=True))
    assert without["verdict"] == "correct", without["error"]
    assert without["environment"]["sandbox"]["prestarted"] is True


def test_a_job_with_a_profiling_process_never_takes_a_spare_without_one():
    job = config.normalize_job(make_job(p.RELU, RIGHT, profile_process=True))
    without = pool.spec_key(pool.spec_of({**job, "profile_process": False}), "none")
    assert without not in pool.spec_keys(job, "none")
    assert pool.spec_keys({**job, "profile_process": False}, "none")[0] == without


def test_a_spares_profiling_process_its_job_does_not_take_is_killed_at_handover(monkeypatch):
    """It holds device memory that the job was not admitted with (spare.PreparedWorkers)."""
    started: list[FakeHandle] = []

    class FakeHandle:
        def __init__(self, device, limits, log_limit, workdir):
            self.workdir, self.killed = Path(workdir), False
            self.proc = type("Proc", (), {"poll": staticmethod(lambda: None), "pid": 1})()
            started.append(self)

        def post(self, *args, **kwargs):
            pass

        def kill(self, **kwargs):
            self.killed = True

    monkeypatch.setattr(workers, "WorkerHandle", FakeHandle)
    spec = {"device": "cpu", "limits": {}, "log_limit": 100, "profile_process": True}
    start_worker, _ = spare._prepare_worker(None, spec)
    judge_stub = Judge.__new__(Judge)
    gate_pids: list[int] = []
    judge_stub.job = {"limits": {}, "log_limit": 100, "profile_process": False,
                      "mode": "evaluate", "measure": True}
    judge_stub.start_worker, judge_stub.device = start_worker, "cpu"
    judge_stub.workdir, judge_stub.profiler = Path.cwd(), None
    judge_stub.gate = type("Gate", (), {"candidates": lambda self, pids, cgroup: gate_pids.extend(
        pids)})()
    FakeHandle.cgroup, FakeHandle.pids = None, set()
    judge_stub._start_workers()
    worker, profiler = started
    assert judge_stub.worker is worker and not worker.killed
    assert profiler.workdir.name == "profiler" and profiler.killed
