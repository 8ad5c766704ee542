"""Faults end in a retry or a clear status, never a lost or duplicated submission: the database
locked by another connection (while a submission is stored, while its task is enqueued, while a
runner stores a result), a runner stopped and restarted with work in the queue, and the disk
filling up during a build. (A runner killed outright: tests/test_runner_recovery.py.)"""

import resource
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone
from django_q.models import OrmQ

from gpu_runner import leased
from submissions.models import Evaluation, Submission
from submissions.queues import enqueue_evaluation
from submissions.services import submission_create
from tests.api_support import token_for
from tests.conftest import REPO, kernel_source, process_env, stop_process, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

RELU = kernel_source("relu_correct.py")
PAYLOAD = {"level": 1, "number": 901, "backend": "torch", "hardware": "cpu", "source": RELU}
FAST_RECOVERY = {"RUNNER_LEASE_SECONDS": "3"}


@pytest.fixture(autouse=True)
def sqlite_only(settings):
    if not settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        pytest.skip("the lock is taken with SQLite's own BEGIN EXCLUSIVE")
    cache.clear()


@contextmanager
def database_locked_for(seconds: float) -> Iterator[threading.Thread]:
    """Another connection takes SQLite's write lock and keeps it for `seconds`."""
    taken = threading.Event()

    def hold() -> None:
        other = sqlite3.connect(connection.settings_dict["NAME"], timeout=30)
        other.execute("BEGIN EXCLUSIVE")
        taken.set()
        time.sleep(seconds)
        other.commit()
        other.close()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert taken.wait(30), "could not take the lock"
    try:
        yield holder
    finally:
        holder.join(seconds + 30)


@pytest.fixture
def short_busy_timeout():
    """This process waits 1 s for a lock instead of 30, so that a long lock makes it fail."""
    options = connection.settings_dict["OPTIONS"]
    saved = options.get("timeout")
    connection.close()
    options["timeout"] = 1
    yield
    connection.close()
    options["timeout"] = saved


def api_client(user) -> Client:
    client = Client(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    assert client.get("/api/v1/submissions/").status_code == 200  # token touched, warm
    return client


def submit(client: Client, key: str = ""):
    extra = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post("/api/v1/submissions/", PAYLOAD, content_type="application/json", **extra)


# ---- the database is locked ----------------------------------------------------------------------


def test_a_submission_made_while_the_database_is_briefly_locked_waits_and_is_stored_once(
    user, cpu_hardware, relu_problem
):
    """Slow: it holds SQLite's write lock for seconds from another connection, by design."""
    client = api_client(user)
    started = time.monotonic()
    with database_locked_for(3):
        response = submit(client)
    assert response.status_code == 202
    assert time.monotonic() - started >= 2.5  # it waited for the lock rather than failing
    submission = Submission.objects.get()
    assert submission.enqueued_at is not None
    assert OrmQ.objects.count() == 1


def test_a_lock_held_past_the_busy_timeout_gets_503_and_the_retry_stores_exactly_one(
    user, cpu_hardware, relu_problem, short_busy_timeout
):
    """Slow: it waits out SQLite's busy timeout, seconds by design."""
    client = api_client(user)
    with database_locked_for(4):
        response = submit(client, key="agent-17")
        assert response.status_code == 503
        body = response.json()
        assert body["code"] == "database_unavailable"
        assert "nothing was changed" in body["detail"]
        assert response["Retry-After"] == "5"
    assert Submission.objects.count() == 0 and OrmQ.objects.count() == 0
    first, again = submit(client, key="agent-17"), submit(client, key="agent-17")
    assert (first.status_code, again.status_code) == (202, 202)
    assert first.json()["id"] == again.json()["id"]
    assert Submission.objects.count() == 1 and OrmQ.objects.count() == 1


def test_a_page_that_meets_a_locked_database_answers_503_with_retry_after(
    client, user, cpu_hardware, relu_problem, short_busy_timeout, settings
):
    """Slow: it waits out SQLite's busy timeout, seconds by design."""
    middleware = "kbsite.middleware.DatabaseUnavailableMiddleware"
    if middleware not in settings.MIDDLEWARE:
        settings.MIDDLEWARE = [*settings.MIDDLEWARE, middleware]
    client.force_login(user)
    form = {"problem": relu_problem.pk, "backend": "torch", "hardware": "cpu",
            "precision": "fp32", "source": RELU}
    with database_locked_for(4):
        response = client.post("/submissions/new/", form)
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "nothing was changed" in response.content.decode()
    assert Submission.objects.count() == 0
    assert client.post("/submissions/new/", form).status_code == 302


def test_a_task_that_cannot_reach_the_broker_after_the_commit_is_queued_by_the_sweep(
    user, cpu_hardware, relu_problem, short_busy_timeout, start_runner, caplog
):
    """Slow: a real runner's heartbeat sweep finds the submission whose task never reached the
    broker."""
    holders = []

    def lock_right_after_the_commit() -> None:
        # Registered before the submission's own callbacks, so it runs first: the enqueue that
        # follows meets the lock, tries three times, and gives up.
        context = database_locked_for(7)  # past three tries of 1 s each and their 1.5 s of waits
        holders.append(context)
        context.__enter__()

    with transaction.atomic():
        transaction.on_commit(lock_right_after_the_commit)
        submission = submission_create(
            user=user, problem=relu_problem, source=RELU, backend="torch", hardware=cpu_hardware
        )
    holders[0].__exit__(None, None, None)
    submission.refresh_from_db()
    assert submission.status == Submission.Status.QUEUED  # stored, and the caller got it
    assert submission.enqueued_at is None and OrmQ.objects.count() == 0
    assert "the sweep will queue it" in caplog.text

    # What the runner's heartbeat does, once its own enqueue has had time: queue it again. A
    # second task for it (the broker redelivering, a sweep racing an enqueue that did land) must
    # not evaluate it twice.
    Submission.objects.filter(pk=submission.pk).update(
        created_at=timezone.now() - timedelta(seconds=leased.UNQUEUED_GRACE_SECONDS + 1)
    )
    assert leased.sweep(hardware=cpu_hardware)[leased.SUBMISSION.name] == 1
    assert leased.sweep(hardware=cpu_hardware)[leased.SUBMISSION.name] == 0
    assert enqueue_evaluation(submission)
    assert OrmQ.objects.count() == 2
    start_runner()
    wait_for(lambda: Submission.objects.get(pk=submission.pk).status == "finished", timeout=180)
    assert Evaluation.objects.filter(submission=submission).count() == 1
    assert Submission.objects.get(pk=submission.pk).verdict == "correct"
    wait_for(lambda: OrmQ.objects.count() == 0, timeout=30)  # the twin was consumed, not kept


def test_a_runner_that_meets_a_locked_database_while_storing_its_result_stores_it_once(
    user, cpu_hardware, relu_problem, start_runner
):
    """Slow: a real runner process meets the lock while storing its result."""
    slow = kernel_source("relu_slow.py").replace("__SLEEP_SECONDS__", "3")
    submission = submission_create(
        user=user, problem=relu_problem, source=slow, backend="torch", hardware=cpu_hardware
    )
    start_runner()
    wait_for(lambda: Submission.objects.get(pk=submission.pk).status == "running", timeout=120)
    # The kernel finishes inside this window; its result, its progress and its lease renewal
    # all meet the lock and wait (the runner's busy timeout is 30 s).
    with database_locked_for(8):
        time.sleep(7)
        assert Submission.objects.get(pk=submission.pk).status == "running"
    wait_for(lambda: Submission.objects.get(pk=submission.pk).status == "finished", timeout=120)
    submission.refresh_from_db()
    assert submission.verdict == "correct" and submission.attempts == 1
    assert Evaluation.objects.filter(submission=submission).count() == 1


# ---- the runner (and with it the ORM broker's consumer) restarts ---------------------------------


def test_work_queued_while_no_runner_serves_and_through_a_runner_restart_is_done_once(
    user, cpu_hardware, relu_problem, start_runner
):
    """Slow: real runner processes stopped and started with work in the queue."""
    slow = kernel_source("relu_slow.py").replace("__SLEEP_SECONDS__", "4")
    submissions = [
        submission_create(user=user, problem=relu_problem, source=source, backend="torch",
                          hardware=cpu_hardware)
        for source in (slow, RELU, RELU)
    ]
    first = start_runner(**FAST_RECOVERY, Q_RETRY="20")
    wait_for(lambda: Submission.objects.filter(status="running").exists(), timeout=120)
    stop_process(first)  # SIGTERM: a restart, not a crash
    assert first.returncode is not None
    start_runner(**FAST_RECOVERY, Q_RETRY="20")
    wait_for(
        lambda: Submission.objects.filter(status="finished").count() == len(submissions),
        timeout=240,
    )
    for submission in submissions:
        submission.refresh_from_db()
        assert submission.verdict == "correct", submission.pk
        assert Evaluation.objects.filter(submission=submission).count() == 1


# ---- the disk fills during a build ---------------------------------------------------------------

# A build step that writes a large object file, as an extension build does; gcc is what fails.
BUILDS_A_LARGE_OBJECT = '''
import os
import subprocess
import tempfile

import torch
import torch.nn as nn


def _build() -> None:
    folder = tempfile.mkdtemp()
    source = os.path.join(folder, "blob.c")
    with open(source, "w") as f:
        f.write("char blob[96 << 20] = {1};\\n")
    done = subprocess.run(["gcc", "-c", source, "-o", os.path.join(folder, "blob.o")],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError("the build failed:\\n" + done.stderr)


_build()


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
'''


@pytest.fixture
def runner_on_a_small_disk(tmp_path):
    """A runner whose processes cannot write a file past 48 MiB (RLIMIT_FSIZE, inherited by the
    sandbox, the compiler and the assembler): what a full disk looks like to a build."""
    limit = 48 * 1024 * 1024

    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    log = open(tmp_path / "runner.log", "w")  # noqa: SIM115 (open while the runner runs)
    process = subprocess.Popen(
        [sys.executable, "manage.py", "runner", "--hardware", "cpu"],
        cwd=REPO,
        env=process_env(BUILD_CACHE_DIR=str(tmp_path / "build"), TMPDIR=str(tmp_path)),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=small_disk,
    )
    yield process
    stop_process(process, sig=signal.SIGTERM)


def test_a_build_that_fills_the_disk_ends_with_a_clear_status_and_the_next_one_works(
    user, cpu_hardware, relu_problem, runner_on_a_small_disk
):
    """Slow: a real build in the sandbox fills a real (limited) disk."""
    full, fine = (
        submission_create(user=user, problem=relu_problem, source=source, backend="torch",
                          hardware=cpu_hardware)
        for source in (BUILDS_A_LARGE_OBJECT, RELU)
    )
    wait_for(lambda: Submission.objects.filter(status="finished").count() == 2, timeout=240)
    evaluation = Evaluation.objects.get(submission=full)
    assert evaluation.verdict == "compile_error"
    assert "the build failed" in evaluation.error
    said = evaluation.error + evaluation.compile_log
    # The assembler is killed by SIGXFSZ (Python's subprocess restores its default action), or
    # a writer that ignores it gets EFBIG: either way the compiler's words reach the submitter.
    assert "File size limit exceeded" in said or "File too large" in said
    assert Evaluation.objects.get(submission=fine).verdict == "correct"
    assert runner_on_a_small_disk.poll() is None  # the runner itself carries on
