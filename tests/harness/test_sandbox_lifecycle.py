"""The sandbox's process tree and how it ends: with the runner that launched it, and with a
clear verdict when the kernel kills the judge (the out-of-memory killer)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from evaluator.runner import sandbox
from evaluator.runner.sandbox import run_job

from . import problems as p
from .conftest import make_job

REPO = Path(__file__).resolve().parents[2]

# A candidate whose first call never returns: the tree is alive and busy until killed.
HANGING = p.RELU.replace("class Model(", "class ModelNew(").replace(
    "return torch.relu(x)", "import time\n        time.sleep(3600)")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _descendants(pid: int) -> list[int]:
    tree, out, todo = _children(), [], [pid]
    while todo:
        kids = tree.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _judge_pids(root: int) -> list[int]:
    """The judge (not `unshare` in front of it) among root's descendants."""
    return [pid for pid in _descendants(root)
            if "evaluator" in _cmdline(pid) and not _cmdline(pid).startswith("unshare")
            and "probe import main" not in _cmdline(pid)]


LAUNCHER = """
import json, sys
sys.path.insert(0, {root!r})
from evaluator.runner.sandbox import run_job
job = json.loads(sys.argv[1])
run_job(job, on_event=lambda e: print(json.dumps(e), flush=True))
"""


def test_the_whole_tree_dies_when_the_process_that_launched_it_is_killed():
    job = make_job(p.RELU, HANGING, time_limit_s=120)
    runner = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER.format(root=str(REPO)), json.dumps(job)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        # Wait until the candidate is running (and hanging) in the first trial.
        for line in runner.stdout:
            if json.loads(line).get("type") == "trial":
                break
        time.sleep(0.5)
        tree = _descendants(runner.pid)
        assert any("probe import main" in _cmdline(pid) or "harness.worker" in _cmdline(pid)
                   for pid in tree), "the worker should be running"
        assert _judge_pids(runner.pid), "the judge should be running"
        runner.kill()  # SIGKILL: no handler, no atexit, no finally in the runner
        runner.wait(timeout=10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(pid) for pid in tree):
            time.sleep(0.1)
        left = [(pid, _cmdline(pid)) for pid in tree if _alive(pid)]
        assert left == [], f"processes outlived the runner that launched them: {left}"
    finally:
        if runner.poll() is None:
            runner.kill()


def _kill_judge_when_checking(event: dict) -> None:
    if event.get("type") == "trial" and event.get("k") == 1:
        time.sleep(0.3)
        for pid in _judge_pids(os.getpid()):
            os.kill(pid, signal.SIGKILL)


def test_a_judge_killed_by_the_out_of_memory_killer_is_out_of_memory(monkeypatch):
    # The kernel's OOM-kill counter (outside this machine's control) moves during the run.
    counts = iter([7, 8])
    monkeypatch.setattr(sandbox, "oom_kill_count", lambda: next(counts))
    result = run_job(make_job(p.RELU, HANGING, time_limit_s=120),
                     on_event=_kill_judge_when_checking)
    assert result["verdict"] == "out_of_memory", result["error"]
    assert "out of host memory" in result["error"]
    assert "out-of-memory killer" in result["error"] and "SIGKILL" in result["error"]
    assert "exited with status" not in result["error"]  # unshare's way of saying SIGKILL


def test_a_judge_killed_by_something_else_says_so_plainly(monkeypatch):
    monkeypatch.setattr(sandbox, "oom_kill_count", lambda: 3)
    result = run_job(make_job(p.RELU, HANGING, time_limit_s=120),
                     on_event=_kill_judge_when_checking)
    assert result["verdict"] == "runtime_error"
    assert "killed (SIGKILL)" in result["error"]
    assert "no out-of-memory kill" in result["error"]


def test_under_unshare_a_sigkilled_child_is_recognised_from_unshares_exit():
    # util-linux unshare --fork cannot re-raise SIGKILL: it exits 1 with this message.
    result = sandbox._judge_died(make_job(p.RELU, p.RELU), 1,
                                 "unshare: sigprocmask unblock failed", None)
    assert result["verdict"] == "out_of_memory"
    assert "most likely" in result["error"]
    other = sandbox._judge_died(make_job(p.RELU, p.RELU), 1, "Traceback ...", None)
    assert other["verdict"] == "harness_error"
    assert "exited with status 1" in other["error"]


def test_a_worker_whose_sandbox_fails_to_start_ends_at_once_not_at_the_time_limit(
        tmp_path, monkeypatch):
    """bwrap exited with an error while something it started kept the worker's pipe open (the
    judge's /proc once made a second sandbox fail so): the judge sees the process gone within a
    second, instead of waiting for a reply until the evaluation's time limit."""
    import pytest

    from evaluator import launcher
    from evaluator.config import DEFAULT_LIMITS
    from evaluator.judge.workers import Verdict, WorkerHandle
    from evaluator.runner import jail

    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\nsleep 30 &\necho 'bwrap: cannot start' >&2\nexit 1\n")
    fake.chmod(0o755)
    slot = tmp_path / "slot"
    slot.mkdir()
    decision = jail.for_job("cpu", slot, 512)
    if decision.get("mode") != "bwrap":
        pytest.skip("no bubblewrap sandbox on this host")
    monkeypatch.setenv(launcher.JAIL_ENV, json.dumps({**decision, "bwrap": str(fake)}))
    handle = WorkerHandle("cpu", dict(DEFAULT_LIMITS), 4096, tmp_path / "worker")
    started = time.monotonic()
    try:
        with pytest.raises(Verdict) as ended:
            handle.request(None, deadline=time.monotonic() + 30, phase="start")
    finally:
        handle.kill()
    assert time.monotonic() - started < 5
    assert ended.value.verdict == "runtime_error", ended.value
