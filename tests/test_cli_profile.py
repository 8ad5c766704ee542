"""`kb status` shows where the time went; `kb profile` asks for an Nsight Compute report and
waits for the runner's answer (a real server and a real CPU runner, which has no ncu)."""

import pytest

from tests.api_support import token_for
from tests.leaderboard_factory import make_result
from tests.test_cli import kb
from tests.test_profiles import COST, PROFILE

pytestmark = pytest.mark.django_db(transaction=True)


def test_kb_status_prints_the_per_kernel_table(tmp_path, live_site, user, relu_problem,
                                                cpu_hardware):
    """Slow: the real kb command, a process of its own, against the real server."""
    evaluation = make_result(problem=relu_problem, hardware=cpu_hardware, user=user)
    evaluation.profile = PROFILE
    evaluation.static_report = {"checks": {"cost": COST}}
    evaluation.save(update_fields=["profile", "static_report"])
    assert kb("login", "--url", live_site, "--token", token_for(user),
              home=tmp_path).returncode == 0
    status = kb("status", str(evaluation.submission_id), home=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "Submitted kernel: 2,743.7 µs" in status.stdout
    assert "* bias_relu_kernel(float*, float const*, long, long)" in status.stdout
    assert "Reference (PyTorch): 2,751.3 µs" in status.stdout


def test_kb_profile_waits_for_the_runners_answer(tmp_path, live_site, user, relu_problem,
                                                 cpu_hardware, start_runner):
    """Slow: the real kb command waits on the real server while the report is answered."""
    submission = make_result(problem=relu_problem, hardware=cpu_hardware, user=user).submission
    assert kb("login", "--url", live_site, "--token", token_for(user),
              home=tmp_path).returncode == 0
    start_runner("cpu")
    result = kb("profile", str(submission.pk), "--wait", "--timeout", "120", home=tmp_path)
    assert "Nsight Compute report" in result.stderr and "queued" in result.stderr
    assert ": unavailable" in result.stdout and "this runner serves a CPU" in result.stdout
    assert result.returncode == 1  # no report was made
    latest = kb("profile", str(submission.pk), "--latest", "--json", home=tmp_path)
    assert latest.returncode == 1 and '"status": "unavailable"' in latest.stdout
