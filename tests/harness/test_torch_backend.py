"""End to end through run_job on the CPU with plain-PyTorch kernels: every verdict, the
sandbox's promises and the result's fields."""

from __future__ import annotations

import os
import time
from pathlib import Path

from evaluator import EVALUATOR_VERSION, VERDICTS, launcher
from evaluator.runner.sandbox import run_job

from . import problems as p
from .conftest import make_job


def _log(result: dict) -> str:
    return result["logs"]["stdout"] + result["logs"]["stderr"]


def test_it_judges_a_right_kernel_correct_and_times_candidate_and_reference():
    events: list[dict] = []
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_RIGHT, measure=True),
                     on_event=events.append)
    assert result["verdict"] == "correct", result["error"]
    assert result["correct"] is True
    assert [t["passed"] for t in result["trials"]] == [True] * 5
    assert all(t["max_abs_diff"] <= 1e-4 for t in result["trials"])
    for side in ("candidate", "reference"):
        stats = result[side]
        assert set(stats) == {"median_ms", "mad_ms", "mean_ms", "std_ms", "min_ms", "max_ms",
                              "n"}
        assert stats["n"] >= 5 and stats["min_ms"] <= stats["median_ms"] <= stats["max_ms"]
    assert result["speedup"] == result["reference"]["median_ms"] / result["candidate"]["median_ms"]
    # No flag; the judge's clock may note a timing it could not confirm on a busy host.
    assert [f for f in result["flags"] if f != "timing_unconfirmed"] == []
    assert result["evaluator_version"] == EVALUATOR_VERSION
    assert result["seeds"]["server"] == 20240611 and len(result["seeds"]["trials"]) == 5
    assert result["environment"]["torch"] and result["environment"]["python"]
    assert {"process_start", "compile", "inputs", "correctness", "timing"} <= set(result["phases"])
    # The candidate ran in another process than this one (the runner).
    assert result["pids"] and os.getpid() not in result["pids"]
    phases = [e["phase"] for e in events if e["type"] == "phase"]
    assert phases == ["starting", "compiling", "checking", "timing", "profiling", "done"]
    trials = [(e["k"], e["n"]) for e in events if e["type"] == "trial"]
    assert trials == [(k, 5) for k in range(1, 6)]


def test_weights_match_because_modelnew_is_built_with_the_same_seed():
    same_code = p.LINEAR_RELU.replace("class Model(", "class ModelNew(")
    result = run_job(make_job(p.LINEAR_RELU, same_code))
    assert result["verdict"] == "correct", result["error"]
    assert all(t["max_abs_diff"] == 0.0 for t in result["trials"])


def test_it_reports_incorrect_when_values_are_off():
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_OFF))
    assert result["verdict"] == "incorrect"
    assert result["correct"] is False
    assert "values differ" in result["error"]
    trial = result["trials"][0]
    assert trial["passed"] is False and abs(trial["max_abs_diff"] - 1e-2) < 1e-3
    assert result["candidate"] is None and result["speedup"] is None


def test_a_looser_tolerance_from_the_problem_accepts_the_same_kernel():
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_OFF, atol=2e-2, rtol=0))
    assert result["verdict"] == "correct", result["error"]


def test_it_reports_incorrect_on_a_wrong_shape():
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_WRONG_SHAPE))
    assert result["verdict"] == "incorrect"
    assert "shape" in result["error"]


def test_it_reports_incorrect_on_a_wrong_dtype():
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_WRONG_DTYPE))
    assert result["verdict"] == "incorrect"
    assert "dtype" in result["error"]


def test_nan_in_the_output_never_passes_even_with_huge_tolerances():
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_NAN, atol=1e9, rtol=1e9))
    assert result["verdict"] == "incorrect"
    assert "NaN" in result["error"]


def test_it_reports_runtime_error_with_a_traceback_trimmed_to_the_candidate():
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_RAISES))
    assert result["verdict"] == "runtime_error"
    assert "kernel exploded on purpose" in result["error"]
    assert "candidate.py" in result["traceback"]
    assert "evaluator" not in result["traceback"]


def test_it_reports_timeout_when_the_kernel_loops_forever():
    started = time.monotonic()
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_LOOPS, time_limit_s=12))
    elapsed = time.monotonic() - started
    assert result["verdict"] == "timeout"
    assert "time limit" in result["error"]
    assert elapsed < 12 + 5


def test_a_segfaulting_kernel_gives_runtime_error_naming_the_signal_and_the_next_run_works():
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_SEGFAULTS))
    assert result["verdict"] == "runtime_error"
    assert "crashed: SIGSEGV" in result["error"]
    after = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_RIGHT))
    assert after["verdict"] == "correct", after["error"]


def test_a_kernel_that_exits_its_process_gives_runtime_error():
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_EXITS))
    assert result["verdict"] == "runtime_error"
    assert "status 3" in result["error"]


def test_it_reports_out_of_memory_when_the_kernel_allocates_until_memory_error():
    job = make_job(p.LINEAR_RELU, p.LINEAR_RELU_HOARDS, limits={"address_space_mb": 3072})
    result = run_job(job)
    assert result["verdict"] == "out_of_memory", result["error"]
    assert "MemoryError" in result["error"]


def test_it_reports_compile_error_on_a_syntax_error():
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_SYNTAX_ERROR))
    assert result["verdict"] == "compile_error"
    assert "SyntaxError" in result["error"]
    assert result["trials"] == []


def test_it_reports_compile_error_when_modelnew_is_missing():
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_NO_MODELNEW))
    assert result["verdict"] == "compile_error"
    assert "ModelNew" in result["error"]


def test_it_rejects_a_kernel_that_overwrites_and_returns_its_input():
    result = run_job(make_job(p.RELU, p.RELU_IN_PLACE))
    assert result["verdict"] == "rejected"
    assert "output_aliases_input" in result["flags"]
    assert "input_mutated" in result["flags"]


def test_integer_inputs_keep_their_dtype():
    result = run_job(make_job(p.GATHER_ROWS, p.GATHER_ROWS_RIGHT))
    assert result["verdict"] == "correct", result["error"] + result["traceback"]


def test_fp16_precision_casts_the_inputs_and_uses_the_fp16_tolerance():
    result = run_job(make_job(p.RELU, p.RELU_FP16_CHECKS_DTYPE, precision="fp16"))
    assert result["verdict"] == "correct", result["error"] + result["traceback"]
    assert result["tolerance"] == {"atol": 1e-2, "rtol": 1e-2}


def test_the_candidate_sees_a_scrubbed_environment_a_fresh_folder_and_no_network(monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "very-secret-value")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:pw@db/kb")
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "kbsite.settings")
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_SNOOPS, n_trials=1))
    assert result["verdict"] == "correct", result["error"]
    log = _log(result)
    assert "very-secret-value" not in log and "postgres://" not in log
    env_line = next(line for line in log.splitlines() if line.startswith("ENV"))
    for name in ("SECRET_KEY", "DATABASE_URL", "DJANGO_SETTINGS_MODULE", "REDIS_URL"):
        assert name not in env_line
    cwd = next(line for line in log.splitlines() if line.startswith("CWD")).split()[1]
    home = next(line for line in log.splitlines() if line.startswith("HOME")).split()[1]
    # Its home and working folder are on the sandbox's own tmpfs, which vanishes with it.
    assert cwd != os.getcwd()
    assert (cwd, home) == (launcher.WORK, launcher.HOME)
    sandbox = result["environment"]["sandbox"]
    assert sandbox["engine"] == "bubblewrap" and sandbox["tmpfs_mb"]
    assert sandbox["network_isolated"]
    assert "NET connected" not in log


def test_candidate_output_cannot_corrupt_the_protocol_and_logs_are_truncated_and_clean():
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_CHATTY, n_trials=1, log_limit=4096))
    assert result["verdict"] == "correct", result["error"]
    assert "red text" in result["logs"]["stdout"]
    assert "\x1b" not in result["logs"]["stdout"]
    assert "bytes truncated" in result["logs"]["stderr"]
    assert len(result["logs"]["stderr"]) < 5000


def test_the_server_seed_decides_the_inputs():
    def inputs_seen(seed: int) -> list[str]:
        result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_PRINTS_INPUTS, seed=seed,
                                  n_trials=3))
        assert result["verdict"] == "correct", result["error"]
        return [line for line in result["logs"]["stdout"].splitlines() if line.startswith("INPUT")]

    first, again, other = inputs_seen(1), inputs_seen(1), inputs_seen(2)
    assert first == again
    assert first != other
    assert len(set(first)) == 3, "each trial gets fresh inputs"


def test_a_malformed_job_is_a_harness_error_not_a_crash():
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_RIGHT, backend="fortran"))
    assert result["verdict"] == "harness_error"
    assert "backend" in result["error"]
    assert result["verdict"] in VERDICTS


def test_a_broken_reference_is_a_harness_error():
    result = run_job(make_job("this is not python", p.LINEAR_RELU_RIGHT))
    assert result["verdict"] == "harness_error"
    assert "reference" in result["error"]


def test_processes_the_candidate_leaves_behind_die_with_the_evaluation():
    # The kernel starts a detached grandchild (its own session, so outside the process group)
    # that prints a unique mark it carries in its command line, and sleeps: the sandbox's pid
    # namespace must take it down with the evaluation. It is looked for by that mark among
    # the host's processes (pids inside the sandbox are its namespace's).
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_LEAVES_A_PROCESS, n_trials=1))
    assert result["verdict"] == "correct", result["error"]
    child_line = next(line for line in _log(result).splitlines() if line.startswith("CHILD"))
    mark = child_line.split()[1]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive_with(mark):
        time.sleep(0.1)
    assert not _alive_with(mark)


def test_the_process_limit_binds_the_candidate_even_under_a_root_runner():
    # The worker counts as one of the 50: the candidate gets 49 children and then EAGAIN.
    # (Before the sandbox, a root runner's candidate was root, which RLIMIT_NPROC does not bind.)
    result = run_job(make_job(p.LINEAR_RELU, p.LINEAR_RELU_FORKS, n_trials=1,
                              limits={"processes": 50}))
    assert result["verdict"] == "correct", result["error"]
    line = next(line for line in _log(result).splitlines() if line.startswith("FORKS"))
    forks, refused = int(line.split()[1]), line.split()[2:]
    assert forks < 50 and refused == ["BlockingIOError"], line


def _alive_with(mark: str) -> list[int]:
    """Host pids of live (not zombie) processes whose command line holds `mark`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if mark.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def test_the_hard_limit_kills_the_whole_tree_even_when_the_judge_is_stuck():
    stuck_reference = p.LINEAR_RELU.replace(
        "def get_inputs():", "def get_inputs():\n    import time\n    time.sleep(1000)"
    )
    started = time.monotonic()
    result = run_job(make_job(stuck_reference, p.LINEAR_RELU_RIGHT, time_limit_s=8))
    assert result["verdict"] == "timeout"
    assert "8 s" in result["error"]
    assert time.monotonic() - started < 8 + 5


# The candidate fails if the tensor it was given on the previous call is still alive on the
# next one. Between correctness trials nothing may keep a trial's inputs (on a problem of 6 GB
# a tensor, memory held across trials ran an H200 out of memory); the timed calls reuse their
# input sets, so only the trials are checked.
RELU_CHECKING_INPUTS_ARE_FREED = '''
import weakref

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.previous = None
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls <= 5 and self.previous is not None and self.previous() is not None:
            raise RuntimeError("the previous trial's input is still alive")
        self.previous = weakref.ref(x)
        return torch.relu(x)
'''


def test_a_trials_inputs_are_freed_before_the_next_trial():
    result = run_job(make_job(p.RELU, RELU_CHECKING_INPUTS_ARE_FREED, measure=False))
    assert result["verdict"] == "correct", result["error"]
    assert [t["passed"] for t in result["trials"]] == [True] * 5
