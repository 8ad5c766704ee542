"""The scaled setup as deployed: PostgreSQL, Redis, web processes and runners apart.

Run by `make test-scaled` (local PostgreSQL and Redis); skipped on the embedded default.
"""

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest
from channels.layers import get_channel_layer
from channels_redis.core import RedisChannelLayer
from django.conf import settings
from django.db import connection
from django_q.brokers import get_broker
from websockets.sync.client import connect

from submissions.models import Evaluation, Submission
from submissions.services import submission_create
from tests.conftest import (
    REPO,
    free_port,
    kernel_source,
    process_env,
    stop_process,
    wait_for,
)

pytestmark = [
    pytest.mark.scaled,
    pytest.mark.skipif(
        not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")),
        reason="needs DATABASE_URL and REDIS_URL (make test-scaled starts both)",
    ),
]


@pytest.mark.django_db
def test_the_scaled_run_uses_postgresql_and_redis_for_the_queue_and_the_live_layer():
    # Guards `make test-scaled` itself: were the URLs lost on the way, every other test would
    # pass on SQLite and prove nothing about this setup.
    assert connection.vendor == "postgresql"
    broker = get_broker("cpu")
    assert type(broker).__name__ == "Redis" and broker.ping()
    assert type(get_channel_layer()).__name__ == "RedisChannelLayer"


@pytest.fixture
def web_process(tmp_path) -> Iterator[Callable[[], int]]:
    """Start daphne processes on this run's database, each on its own port, like web workers."""
    started: list[subprocess.Popen] = []

    def start() -> int:
        port = free_port()
        log = open(tmp_path / f"daphne-{port}.log", "w")  # noqa: SIM115 (lives on)
        started.append(
            subprocess.Popen(
                [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                 "kbsite.asgi:application"],
                cwd=REPO, env=process_env(), stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        return port

    yield start
    for process in started:
        stop_process(process)


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def statuses_until_finished(client, *, timeout: float) -> list[str]:
    seen = []
    while "finished" not in seen:
        seen.append(json.loads(client.recv(timeout=timeout)).get("status"))
    return seen


@pytest.mark.django_db(transaction=True)
def test_a_runner_given_the_database_the_broker_and_the_key_streams_to_two_web_processes(
    tmp_path, user, cpu_hardware, relu_problem, web_process
):
    submission = submission_create(
        user=user, problem=relu_problem, source=kernel_source("relu_correct.py"),
        backend="torch", hardware=cpu_hardware,
    )
    ports = [web_process(), web_process()]
    for port in ports:
        wait_for(lambda port=port: listening(port), timeout=60, interval=0.5)
    with ExitStack() as stack:
        clients = [
            stack.enter_context(
                connect(f"ws://127.0.0.1:{port}/ws/submissions/{submission.pk}/",
                        origin=f"http://127.0.0.1:{port}", open_timeout=30)
            )
            for port in ports
        ]
        for client in clients:
            assert json.loads(client.recv(timeout=30))["status"] == "queued"
        # Idle for longer than the channel layer blocks on Redis waiting for a message: a
        # Redis client that times out that read drops every quiet websocket (error 1011).
        time.sleep(RedisChannelLayer.brpop_timeout + 3)

        # What a GPU host is given: the two URLs, the key django-q signs tasks with (the web
        # processes' own) and, on its command line, its hardware name. No settings module,
        # no DEBUG, nothing else of this test run's environment.
        runner_env = {
            "PATH": os.environ["PATH"],
            "HOME": os.environ.get("HOME", str(tmp_path)),
            "DATABASE_URL": process_env()["DATABASE_URL"],
            "REDIS_URL": os.environ["REDIS_URL"],
            "SECRET_KEY": settings.SECRET_KEY,
            "RUNNER_REQUIRE_CGROUPS": "0",  # CI gives the runner no cgroup v2 memory controller
        }
        log = open(tmp_path / "runner.log", "w")  # noqa: SIM115 (lives on)
        runner = subprocess.Popen(
            [sys.executable, "manage.py", "runner", "--hardware", "cpu"],
            cwd=REPO, env=runner_env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        stack.callback(stop_process, runner)
        # The two web processes share nothing but Redis: each must see the runner's events.
        seen = [statuses_until_finished(client, timeout=240) for client in clients]
    for statuses in seen:
        assert "running" in statuses and statuses[-1] == "finished", statuses
    submission.refresh_from_db()
    assert submission.status == Submission.Status.FINISHED and submission.verdict == "correct"
    evaluation = Evaluation.objects.get(submission=submission)
    assert str(runner.pid) in evaluation.runner_name
    # The task was taken from the hardware's queue in Redis, not left there for another runner.
    assert get_broker(cpu_hardware.queue_name).queue_size() == 0
