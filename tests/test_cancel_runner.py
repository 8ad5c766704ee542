"""Cancel with a real runner (issue 63): `kb cancel` against the real server stops a running
evaluation through its lease, and the runner goes on to the next submission at once."""

import time

import pytest

from submissions.models import Evaluation, Submission
from submissions.services import submission_create
from tests.api_support import token_for
from tests.conftest import kernel_source, wait_for
from tests.test_cli import kb

# Long enough that only a kill ends it in time: the evaluation would otherwise hold the runner
# for this long (under the runner's 60 s time limit, so the limit is not what ends it either).
SLEEP_SECONDS = 50


@pytest.mark.django_db(transaction=True)
def test_kb_cancel_stops_a_real_runners_evaluation_and_the_runner_takes_the_next(
    tmp_path, live_site, start_runner, user, cpu_hardware, relu_problem
):
    """Slow: a real `manage.py runner` (its worker blocked in the sandbox's run_job, the judge a
    process of its own) and the real kb; only real processes show that the heartbeat's kill
    ends the evaluation and frees the runner."""
    slow = kernel_source("relu_slow.py").replace("__SLEEP_SECONDS__", str(SLEEP_SECONDS))
    running = submission_create(user=user, problem=relu_problem, source=slow, backend="torch",
                                hardware=cpu_hardware, test_run=True, timed=False)
    start_runner(RUNNER_LEASE_SECONDS="6")  # a heartbeat every second
    wait_for(lambda: Submission.objects.filter(pk=running.pk, status="running").exists(),
             timeout=120)
    time.sleep(2)  # into the evaluation: its judge and sandbox are up

    login = kb("login", "--url", live_site, "--token", token_for(user), home=tmp_path)
    assert login.returncode == 0, login.stderr
    cancelled = kb("cancel", str(running.pk), home=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"Test run {running.pk}: cancelled" in cancelled.stdout
    at = time.monotonic()

    following = submission_create(user=user, problem=relu_problem,
                                  source=kernel_source("relu_correct.py"), backend="torch",
                                  hardware=cpu_hardware, test_run=True, timed=False)
    wait_for(lambda: Submission.objects.filter(pk=following.pk, status="finished").exists(),
             timeout=SLEEP_SECONDS)
    # The runner was free again long before the cancelled evaluation would have ended.
    assert time.monotonic() - at < SLEEP_SECONDS - 10
    running.refresh_from_db()
    assert running.status == "cancelled" and running.verdict == ""
    assert not Evaluation.objects.filter(submission=running).exists()
    assert running.charged_seconds is not None and running.charged_seconds > 0
    assert Submission.objects.get(pk=following.pk).verdict == "correct"
