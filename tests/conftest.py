"""Shared fixtures: real processes (runner, web server) on the real test database file."""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection

from evaluation.services import hardware_register
from gpu_runner.detect import detect
from problems.services import samples_load

REPO = Path(__file__).resolve().parent.parent
# The KernelBench problem set that sits beside the repository (shared/kernelbench).
KERNELBENCH = Path(os.environ.get("KERNELBENCH_PATH", REPO.parent / "shared" / "kernelbench"))
KERNELS = Path(__file__).resolve().parent / "kernels"


def wait_for(predicate: Callable[[], object], *, timeout: float = 60, interval: float = 0.2):
    """Poll until `predicate()` is truthy; fail with a clear message otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


def kernel_source(name: str) -> str:
    return (KERNELS / name).read_text()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def process_env(**extra: str) -> dict[str, str]:
    """The environment of a subprocess that must share this test run's database."""
    db = settings.DATABASES["default"]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "kbsite.settings", "PYTHONUNBUFFERED": "1"}
    if db["ENGINE"].endswith("sqlite3"):
        env["SQLITE_PATH"] = str(db["NAME"])
    else:
        # On PostgreSQL the test database has its own name; point the child at it.
        env["DATABASE_URL"] = (
            f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or 'localhost'}:"
            f"{db['PORT'] or 5432}/{db['NAME']}"
        )
    env.update(
        {
            "RUNNER_HEARTBEAT_SECONDS": "1",
            "RUNNER_OFFLINE_AFTER_SECONDS": "5",
            "EVALUATION_TIME_LIMIT": env.get("EVALUATION_TIME_LIMIT", "60"),
            # Off unless a test turns it on (tests/test_reverification.py): otherwise every
            # first correct result on a board would also be re-verified, adding evaluations
            # the other flows' tests do not expect.
            "REVERIFY_NEW_RECORDS": "0",
        }
    )
    env.update(extra)
    return env


def stop_process(process: subprocess.Popen, *, sig: int = signal.SIGTERM) -> None:
    """Stop a process started in its own group, and everything it started."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=5)  # queue workers can take long to wind down; no need to wait
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@pytest.fixture(scope="session", autouse=True)
def end_stray_database_sessions(django_db_setup, django_db_blocker):
    """On PostgreSQL, let the test database be dropped at the end of the run.

    Connections that async tests open in sync_to_async's thread outlive the test; PostgreSQL
    refuses to drop a database while they are open.
    """
    yield
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture(autouse=True)
def empty_redis_queues():
    """On the scaled setup, tasks left in Redis by an earlier test must not leak into this one."""
    if settings.REDIS_URL:
        import redis

        redis.from_url(settings.REDIS_URL).flushdb()
    yield


@pytest.fixture
def cpu_hardware(db):
    detected = detect("cpu")
    detected.pop("slug")
    return hardware_register(slug="cpu", **detected)


@pytest.fixture
def sample_problems(db):
    return {outcome.problem.slug: outcome.problem for outcome in samples_load()}


@pytest.fixture
def relu_problem(sample_problems):
    return sample_problems["level1/901_Small_ReLU"]


@pytest.fixture
def user(db):
    return get_user_model().objects.create_user(username="ada", password="a-long-passphrase-1")


@pytest.fixture
def start_runner(tmp_path) -> Iterator[Callable[..., subprocess.Popen]]:
    """Start real `manage.py runner` processes (each in its own process group)."""
    started: list[subprocess.Popen] = []

    def start(hardware: str = "cpu", *args: str, **env: str) -> subprocess.Popen:
        log = open(tmp_path / f"runner-{len(started)}.log", "w")  # noqa: SIM115 (lives on)
        process = subprocess.Popen(
            [sys.executable, "manage.py", "runner", "--hardware", hardware, *args],
            cwd=REPO,
            env=process_env(**env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        stop_process(process)


@pytest.fixture
def live_site(tmp_path) -> Iterator[str]:
    """The real ASGI server (daphne) on a free port, serving this run's database."""
    port = free_port()
    log = open(tmp_path / "daphne.log", "w")  # noqa: SIM115 (open while the server runs)
    process = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
         "kbsite.asgi:application"],
        cwd=REPO,
        env=process_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def listening() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    wait_for(listening, timeout=30)
    yield f"http://127.0.0.1:{port}"
    stop_process(process)


@pytest.fixture
def browser():
    """Debian's chromium driven by Playwright (no browser download)."""
    playwright_sync = pytest.importorskip("playwright.sync_api")
    executable = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
    if not Path(executable).exists():
        pytest.skip("chromium is not installed (make test installs it)")
    # Playwright's sync API runs an event loop in this thread; the ORM calls the test makes
    # around it are ordinary blocking calls, which Django would otherwise refuse.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with playwright_sync.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
