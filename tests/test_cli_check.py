"""`kb check`: the site's evaluation of a kernel on the user's own machine, before it costs
quota: the runner's job, the real harness, what the site would say, and its exit code."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from evaluator.config import normalize_job
from gpu_runner.services import build_job as runner_job
from kbcli import check
from kbcli.main import build_parser, main
from submissions.services import submission_create
from tests.api_support import token_for
from tests.conftest import KERNELS, REPO, kernel_source

SAMPLE_RELU = REPO / "problems" / "samples" / "level1" / "901_Small_ReLU.py"


def kb(*args: str, home: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """The real `kb`, its login and build cache under `home` (the sandbox's own KB_ settings,
    where the host has some, pass through)."""
    env = {k: v for k, v in os.environ.items() if k not in ("KB_URL", "KB_TOKEN", "KB_CONFIG")}
    env.update({"XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache"),
                "PYTHONUNBUFFERED": "1"})
    return subprocess.run([sys.executable, "-m", "kbcli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


# ---- real runs ---------------------------------------------------------------------------------


def test_kb_check_passes_a_right_kernel_and_fails_a_wrong_one_with_its_diagnosis(tmp_path):
    """Slow: kb check as its own process runs the real harness (the judge and the sandboxed
    worker) on a local reference file, with no site at all."""
    right = kb("check", str(KERNELS / "relu_correct.py"), "--reference", str(SAMPLE_RELU),
               home=tmp_path)
    assert right.returncode == 0, right.stdout + right.stderr
    lines = right.stdout.splitlines()
    assert lines[0] == "Check of relu_correct.py: correct"
    assert "  problem    901_Small_ReLU.py  (torch on cpu, fp32)" in lines
    assert "  verdict    correct" in lines and "  trials     5 of 5 passed" in lines
    timed = {line.split()[0]: line.split()[1] for line in lines[1:] if line.startswith("  ")}
    assert float(timed["candidate"]) > 0 and float(timed["reference"]) > 0
    assert timed["speedup"].endswith("x")
    # Its progress on stderr, the site's phases and trials.
    assert "check: trial 5 of 5" in right.stderr and "check: timing" in right.stderr

    wrong = kb("check", str(KERNELS / "relu_wrong.py"), "--reference", str(SAMPLE_RELU),
               home=tmp_path)
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert wrong.stdout.startswith("Check of relu_wrong.py: incorrect\n")
    assert "  verdict    incorrect\n  trials     trial 1 of 5 failed\n" in wrong.stdout
    # The leaky slope is off on the negative half: the diagnosis names elements and values.
    assert "elements outside the tolerance; the worst:" in wrong.stdout
    assert "  speedup    -\n" in wrong.stdout  # a wrong kernel is not timed


@pytest.mark.django_db(transaction=True)
def test_kb_check_takes_the_reference_and_precision_from_the_site(
    tmp_path, live_site, user, relu_problem
):
    """Slow: kb check as its own process reads the problem from the real server (daphne) over
    HTTP, then runs the real harness."""
    login = kb("login", "--url", live_site, "--token", token_for(user), home=tmp_path)
    assert login.returncode == 0, login.stderr
    result = kb("check", str(KERNELS / "relu_correct.py"), "--problem", relu_problem.slug,
                "--json", home=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["problem"] == "level1/901_Small_ReLU" and data["verdict"] == "correct"
    assert data["precision"] == relu_problem.precision and data["flags"] == []
    assert data["candidate_ms"] > 0 and data["speedup"] > 0

    missing = kb("check", str(KERNELS / "relu_correct.py"), "--problem", "level1/999_Nothing",
                 home=tmp_path)
    assert missing.returncode == 1
    assert "There is no problem 'level1/999_Nothing'" in missing.stderr


# ---- the job, in process ------------------------------------------------------------------------


@pytest.mark.parametrize(("precision", "atol"), [("fp32", None), ("fp16", 0.002)])
def test_the_local_job_is_the_runners_job_but_for_its_seed_cache_and_hardware(
    precision, atol, user, relu_problem, cpu_hardware, tmp_path, settings
):
    settings.EVALUATION_MAX_REPS = 0  # the operator's cap (the tests' 30), as its time limit
    relu_problem.atol = atol  # the problem's own tolerance, where it has one, at any precision
    relu_problem.save(update_fields=["atol"])
    source = kernel_source("relu_correct.py")
    submission = submission_create(user=user, problem=relu_problem, source=source,
                                   backend="torch", hardware=cpu_hardware, precision=precision)
    site = normalize_job(runner_job(submission))
    api = APIClient()
    api.force_authenticate(user)
    record = api.get(f"/api/v1/problems/{relu_problem.level}/{relu_problem.number}/").json()
    local = check.build_job(check.site_reference(record), source, backend="torch",
                            precision=precision, device="cpu", build_dir=tmp_path)
    # The site's own: its secret seed, its build cache and owners, its hardware's peak rates
    # and the operator's time limit.
    own = {"seed", "build_dir", "build_owner", "peak_bandwidth_gbs", "peak_tflops",
           "time_limit_s"}
    assert set(local) == set(site)
    assert {k: v for k, v in local.items() if k not in own} == {
        k: v for k, v in site.items() if k not in own}
    assert local["build_dir"] == str(tmp_path) and local["seed"] != site["seed"]
    assert local["atol"] == (atol or {"fp32": 1e-4, "fp16": 1e-2}[precision])


def test_a_reference_file_gets_fp32_and_the_default_tolerances_and_a_chosen_seed():
    reference = check.file_reference(SAMPLE_RELU)
    job = check.build_job(reference, "class ModelNew: ...", backend="torch", precision=None,
                          device="cpu", seed=1234)
    assert reference.name == "901_Small_ReLU.py"
    assert (job["precision"], job["atol"], job["rtol"], job["seed"]) == ("fp32", 1e-4, 1e-4, 1234)
    assert job["n_trials"] == 5 and job["measure"] is True


def test_what_the_harness_would_refuse_or_the_site_does_not_show_stops_the_check():
    with pytest.raises(check.CheckError, match="needs a CUDA device"):
        check.build_job(check.file_reference(SAMPLE_RELU), "", backend="cuda", precision=None,
                        device="cpu")
    with pytest.raises(check.CheckError, match="--reference FILE"):
        check.site_reference({"slug": "level5/1_Secret", "source": None, "precision": "fp32"})


def test_the_command_refuses_an_unreadable_kernel_before_it_starts_anything(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope.py"), "--reference", str(SAMPLE_RELU)]) == 2
    assert "cannot read" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a problem from the site or a file, not both
        build_parser().parse_args(["check", "k.py", "--problem", "p", "--reference", "r.py"])


# ---- what it prints -----------------------------------------------------------------------------

JOB = {"backend": "torch", "precision": "fp32", "device": "cpu", "seed": 77, "n_trials": 5}


def _report(**result) -> dict:
    return check.report(result, problem="level1/19_ReLU", file="k.py", job=JOB)


def test_a_wrong_kernels_check_shows_the_error_and_the_failed_trials_diagnosis():
    data = _report(verdict="incorrect", correct=False, error="trial 1: values differ",
                   trials=[{"k": 1, "passed": False, "diagnosis": {
                       "kind": "values", "outside_tolerance": 3, "elements": 8,
                       "worst": [{"position": [0, 3], "expected": 0.0, "got": -0.5}]}}],
                   traceback="Traceback\n  line\nValueError: off")
    assert data["diagnosis"]["k"] == 1 and check.exit_code(data) == 1
    text = check.summary(data)
    assert text.splitlines()[0] == "Check of k.py: incorrect"
    assert "  trials     trial 1 of 5 failed" in text
    assert "  error      trial 1: values differ" in text
    assert ("  diagnosis  3 of 8 elements outside the tolerance; the worst:\n"
            "               at (0, 3): expected 0.0, got -0.5") in text
    assert "  traceback  Traceback\n" in text and "ValueError: off" in text
    assert "  seed       77  (--seed repeats these inputs)" in text


def test_a_note_keeps_a_correct_kernel_passing_and_an_exploit_flag_fails_it():
    timed = {"verdict": "correct", "correct": True, "trials": [{"k": 1, "passed": True}],
             "candidate": {"median_ms": 0.5}, "reference": {"median_ms": 1.0}, "speedup": 2.0}
    noted = _report(**timed, flags=["timing_unconfirmed"])
    assert noted["flags"] == [] and check.exit_code(noted) == 0
    text = check.summary(noted)
    assert "  speedup    2.00x" in text and "  candidate  0.5 ms" in text
    assert "  note       timing_unconfirmed: the judge's own clock" in text
    flagged = _report(**timed, flags=["background_thread"])
    assert flagged["flags"] == ["background_thread"] and check.exit_code(flagged) == 1
    assert check.summary(flagged).startswith(
        "Check of k.py: correct, flagged (the site keeps it off the boards)\n")
    assert "  exploits   background_thread" in check.summary(flagged)


def test_a_check_killed_for_memory_on_the_cpu_suggests_a_gpu_or_a_smaller_problem():
    # What `kb check` of KernelBench's level1/19_ReLU (6 GiB inputs) said on a CPU after 81 s.
    killed = _report(verdict="runtime_error", correct=False,
                     error="crashed: SIGKILL during start (killed: out of memory or an external "
                           "limit)")
    assert killed["device"] == "cpu" and "--device cuda" in killed["hint"]  # --json has it
    assert "  hint       the problem's tensors may not fit" in check.summary(killed)
    assert "--device cuda" in check.summary(killed)
    wrong = _report(verdict="runtime_error", correct=False, error="ValueError: shapes differ")
    assert "hint" not in check.summary(wrong)
