"""`make run` (manage.py run_embedded) as real processes: the site survives its runner's death.

run_embedded runs on a var/ folder of its own (KBSITE_VAR_DIR: its SQLite file, secret key and
collected static files), with DEBUG off as `make run` has it, on a free port.
"""

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO, free_port, kernel_source, stop_process, wait_for

pytestmark = pytest.mark.timeout(400)

# Settings the test run may have exported that would point run_embedded elsewhere.
FOREIGN = ("DEBUG", "SECRET_KEY", "DATABASE_URL", "REDIS_URL", "SQLITE_PATH", "ALLOWED_HOSTS",
           "ADMIN_PASSWORD", "SECURE_COOKIES")

SUBMIT = """
import os
from django.contrib.auth import get_user_model
from evaluation.models import Hardware
from problems.models import Problem
from submissions.services import submission_create
user = get_user_model().objects.create_user("ada", password="a-long-passphrase-1")
problem = Problem.objects.get(slug="level1/901_Small_ReLU")
hardware = Hardware.objects.get(slug="cpu")
for path in os.environ["SUBMIT_FILES"].split(","):
    source = open(path).read()
    submission = submission_create(
        user=user, problem=problem, source=source, backend="torch", hardware=hardware
    )
    print("submitted", submission.pk)
"""


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def children(pid: int) -> dict[int, str]:
    """The direct children of `pid`: {pid: command line}."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found[int(entry.name)] = cmdline
    return found


def runner_of(pid: int) -> int | None:
    return next((c for c, cmd in children(pid).items() if "manage.py runner" in cmd), None)


@pytest.fixture
def embedded(tmp_path):
    """run_embedded on its own var/ folder and a free port: (process, site URL, var folder)."""
    var, port = tmp_path / "var", free_port()
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN}
    env.update(
        KBSITE_VAR_DIR=str(var), PORT=str(port), PYTHONUNBUFFERED="1",
        RUNNER_HEARTBEAT_SECONDS="1", RUNNER_OFFLINE_AFTER_SECONDS="5",
        EVALUATION_TIME_LIMIT="60", REVERIFY_NEW_RECORDS="0", GENERATION_WORKERS="1",
    )
    log = open(tmp_path / "run_embedded.log", "w")  # noqa: SIM115 (open while it runs)
    process = subprocess.Popen(
        [sys.executable, "manage.py", "run_embedded"], cwd=REPO, env=env,
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    site = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: get(site + "/")[0] == 200, timeout=120)
        yield process, site, var, env
    finally:
        stop_process(process)
        print((tmp_path / "run_embedded.log").read_text()[-5000:])


def statuses(var: Path, ids: list[int]) -> dict[int, tuple[str, str, int]]:
    with sqlite3.connect(var / "db.sqlite3", timeout=30) as db:
        rows = db.execute(
            "SELECT id, status, verdict, attempts FROM submissions_submission"
            f" WHERE id IN ({','.join('?' * len(ids))})",
            ids,
        ).fetchall()
    return {row[0]: row[1:] for row in rows}


def test_it_serves_the_site_with_debug_off_its_static_files_and_a_kept_secret_key(embedded,
                                                                                  tmp_path):
    process, site, var, env = embedded
    status, page = get(site + "/")
    assert status == 200
    # Its runner says how one evaluation is bounded, and serves on a host without a cgroup of
    # its own per evaluation (this one and CI) with a warning (issue 63).
    log = tmp_path / "run_embedded.log"
    wait_for(lambda: "per-evaluation cgroups:" in log.read_text(), timeout=60)
    said = log.read_text()
    assert "per-evaluation cgroups: yes" in said or "warning: per-evaluation cgroups: no" in said
    # Collected, content-hashed static files, served by whitenoise with DEBUG off.
    css = re.search(r'href="(/static/kbsite/site\.[0-9a-f]{12}\.css)"', page).group(1)
    assert get(site + css)[0] == 200
    # The generated key is kept for the next start, readable by its owner alone.
    key = var / "secret-key"
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_text().strip()) >= 50
    assert not (var / "admin-password").exists()  # the admin password is printed, never kept
    status, page = get(site + "/no-such-page/")
    assert status == 404 and "<h1>Not found</h1>" in page and "Page not found at" not in page


def test_it_restarts_a_killed_runner_which_takes_the_queued_work_at_once(embedded, tmp_path):
    process, site, var, env = embedded
    first = wait_for(lambda: runner_of(process.pid), timeout=60)
    # A slow submission that the runner is evaluating when it dies, one queued behind it.
    slow = tmp_path / "slow.py"
    slow.write_text(kernel_source("relu_slow.py").replace("__SLEEP_SECONDS__", "4"))
    correct = tmp_path / "correct.py"
    correct.write_text(kernel_source("relu_correct.py"))
    made = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SUBMIT], cwd=REPO,
        env={**env, "SUBMIT_FILES": f"{slow},{correct}"}, capture_output=True, text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    ids = [int(n) for n in re.findall(r"^submitted (\d+)$", made.stdout, re.M)]
    assert len(ids) == 2
    wait_for(lambda: statuses(var, ids)[ids[0]][0] == "running", timeout=120)

    os.kill(first, signal.SIGKILL)
    killed = time.monotonic()
    assert get(site + "/")[0] == 200  # the site stays up
    second = wait_for(lambda: (r := runner_of(process.pid)) not in (None, first) and r, timeout=30)
    assert second != first
    # The dead runner's claim and its broker task go to the new runner now: not after the
    # 60 s lease, nor django-q2's retry (minutes).
    wait_for(lambda: all(s[0] == "finished" for s in statuses(var, ids).values()), timeout=40)
    assert time.monotonic() - killed < 40
    final = statuses(var, ids)
    assert final[ids[0]] == ("finished", "correct", 2)
    assert final[ids[1]][:2] == ("finished", "correct")
    assert process.poll() is None and get(site + "/")[0] == 200


# ---- the admin account, in this process -------------------------------------------------------


@pytest.fixture
def command(settings, tmp_path, monkeypatch):
    from io import StringIO

    from gpu_runner.management.commands.run_embedded import Command

    settings.VAR_DIR = tmp_path
    for name in ("ADMIN_PASSWORD", "ADMIN_USERNAME"):
        monkeypatch.delenv(name, raising=False)
    return Command(stdout=StringIO())


@pytest.mark.django_db
def test_it_shows_a_generated_admin_password_once_and_keeps_it_nowhere(command, tmp_path):
    from django.contrib.auth import get_user_model

    shown = command._ensure_admin()
    password = re.search(r"password '([^']+)'", shown).group(1)
    assert get_user_model().objects.get(username="admin").check_password(password)
    assert "changepassword" in shown
    assert list(tmp_path.iterdir()) == []
    again = command._ensure_admin()
    assert password not in again and "as set before" in again


@pytest.mark.django_db
def test_it_takes_admin_password_from_the_environment(command, monkeypatch):
    from django.contrib.auth import get_user_model

    monkeypatch.setenv("ADMIN_PASSWORD", "from-the-environment-1")
    shown = command._ensure_admin()
    assert "from-the-environment-1" not in shown and "ADMIN_PASSWORD" in shown
    assert get_user_model().objects.get(username="admin").check_password("from-the-environment-1")


@pytest.mark.django_db
def test_it_removes_a_plaintext_password_file_left_by_an_earlier_version(command, tmp_path):
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_superuser(username="admin", password="old-kept-password-1")
    (tmp_path / "admin-password").write_text("old-kept-password-1")
    command._ensure_admin()
    assert not (tmp_path / "admin-password").exists()
    assert "old-kept-password-1" in command.stdout.getvalue()  # shown one last time
