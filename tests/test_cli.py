"""The `kb` command against a real server (daphne) and a real runner process."""

import json
import os
import stat
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from competitions.models import Competition, Entry
from kbcli import config
from submissions.models import ApiToken, Submission
from tests.api_support import token_for
from tests.conftest import KERNELS, REPO
from tests.leaderboard_factory import make_result


def kb(
    *args: str, home: Path, timeout: float = 300, stdin: str | None = None
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update({"XDG_CONFIG_HOME": str(home), "PYTHONUNBUFFERED": "1"})
    return subprocess.run(
        [sys.executable, "-m", "kbcli", *args], cwd=REPO, env=env, capture_output=True,
        text=True, timeout=timeout, input=stdin if stdin is not None else "",
    )


def test_the_saved_login_is_readable_only_by_its_owner(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("KB_URL", raising=False)
    monkeypatch.delenv("KB_TOKEN", raising=False)
    path = config.save(config.Config(url="http://example.test", token="kb_secret"))
    assert path == tmp_path / "kb" / "config.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert config.load() == config.Config(url="http://example.test", token="kb_secret")
    monkeypatch.setenv("KB_TOKEN", "kb_from_env")
    assert config.load().token == "kb_from_env"


def test_kb_says_how_to_log_in_when_it_is_not(tmp_path):
    result = kb("problems", home=tmp_path)
    assert result.returncode == 1
    assert "kb login" in result.stderr


@pytest.mark.django_db(transaction=True)
def test_kb_login_refuses_a_bad_token_and_saves_nothing(tmp_path, live_site, sample_problems):
    result = kb("login", "--url", live_site, "--token", "kb_wrong", home=tmp_path)
    assert result.returncode == 1
    assert "revoked" in result.stderr or "unknown" in result.stderr
    assert not (tmp_path / "kb" / "config.json").exists()


@pytest.mark.django_db(transaction=True)
def test_kb_submit_explains_a_refusal_with_the_allowed_values(
    tmp_path, live_site, user, relu_problem, cpu_hardware
):
    login = kb("login", "--url", live_site, "--token", token_for(user), home=tmp_path)
    assert login.returncode == 0, login.stderr
    result = kb("submit", str(KERNELS / "relu_correct.py"), "--level", "1", "--number", "901",
                "--backend", "torch", "--hardware", "tpu", home=tmp_path)
    assert result.returncode == 1
    assert "Unknown hardware 'tpu'" in result.stderr and "allowed: cpu" in result.stderr
    assert Submission.objects.count() == 0


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_kb_submit_wait_follows_a_real_runner_to_the_verdict(
    tmp_path, live_site, start_runner, user, relu_problem, cpu_hardware
):
    login = kb("login", "--url", live_site, "--token", token_for(user), home=tmp_path)
    assert login.returncode == 0, login.stderr
    assert stat.S_IMODE((tmp_path / "kb" / "config.json").stat().st_mode) == 0o600

    listing = kb("problems", "--level", "1", home=tmp_path)
    assert listing.returncode == 0 and "level1/901_Small_ReLU" in listing.stdout

    start_runner()
    result = kb("submit", str(KERNELS / "relu_correct.py"), "--level", "1", "--number", "901",
                "--backend", "torch", "--hardware", "cpu", "--wait", home=tmp_path, timeout=400)
    assert result.returncode == 0, result.stdout + result.stderr
    submission = Submission.objects.get()
    assert submission.verdict == "correct"
    # Live progress on stderr, from queued to the verdict; a summary on stdout.
    progress = result.stderr.splitlines()
    assert any("queued" in line or "running" in line for line in progress), result.stderr
    assert f"submission {submission.pk}: finished: correct" in progress
    assert f"Submission {submission.pk}: correct" in result.stdout
    assert "speedup" in result.stdout and "candidate" in result.stdout
    assert "ranking    ranked, #1: Rank 1 on level1/901_Small_ReLU on cpu" in result.stdout

    status = kb("status", str(submission.pk), home=tmp_path)
    assert status.returncode == 0 and "correct" in status.stdout

    board = kb("leaderboard", "--level", "1", "--number", "901", "--hardware", "cpu",
               home=tmp_path)
    assert board.returncode == 0, board.stderr
    assert "ada" in board.stdout


@pytest.mark.django_db(transaction=True)
def test_kb_submit_refuses_a_file_that_does_not_parse_and_names_the_line(
    tmp_path, live_site, user, relu_problem, cpu_hardware
):
    login = kb("login", "--url", live_site, "--token", token_for(user), home=tmp_path)
    assert login.returncode == 0, login.stderr
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\n\nclass ModelNew(torch.nn.Module:\n    pass\n")
    result = kb("submit", str(broken), "--level", "1", "--number", "901", "--backend", "torch",
                "--hardware", "cpu", "--wait", home=tmp_path)
    assert result.returncode == 1
    assert "not valid Python" in result.stderr and "line 3" in result.stderr
    assert "(HTTP 400)" in result.stderr
    assert Submission.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_kb_status_says_whether_the_result_ranks_and_why_not(
    tmp_path, live_site, user, relu_problem, cpu_hardware
):
    ranked = make_result(problem=relu_problem, hardware=cpu_hardware, user=user, ms=1.0)
    flagged = make_result(problem=relu_problem, hardware=cpu_hardware, user=user, ms=0.5,
                          flags=("faster_than_light",))
    login = kb("login", "--url", live_site, "--token", token_for(user), home=tmp_path)
    assert login.returncode == 0, login.stderr
    status = kb("status", str(ranked.submission_id), home=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "ranking    ranked, #1: Rank 1 on level1/901_Small_ReLU on cpu" in status.stdout
    status = kb("status", str(flagged.submission_id), home=tmp_path)
    assert "ranking    off board, flagged: Flagged" in status.stdout
    assert "faster_than_light" in status.stdout
    as_json = kb("status", str(ranked.submission_id), "--json", home=tmp_path)
    assert '"state": "ranked"' in as_json.stdout


@pytest.mark.django_db(transaction=True)
def test_kb_login_with_a_username_makes_a_token_and_never_saves_the_password(
    tmp_path, live_site, user
):
    wrong = kb("login", "--url", live_site, "--username", "ada", stdin="wrong\n", home=tmp_path)
    assert wrong.returncode == 1 and "Invalid username/password" in wrong.stderr
    assert not (tmp_path / "kb" / "config.json").exists()

    result = kb("login", "--url", live_site, "--username", "ada",
                stdin="a-long-passphrase-1\n", home=tmp_path)
    assert result.returncode == 0, result.stderr
    saved = (tmp_path / "kb" / "config.json").read_text()
    assert "a-long-passphrase-1" not in saved
    token = ApiToken.objects.get(user=user)
    assert token.name.startswith("kb on ") and token.scopes == ["read", "submit"]
    assert ApiToken.hash_key(json.loads(saved)["token"]) == token.key_hash
    assert kb("problems", home=tmp_path).returncode == 0


@pytest.mark.django_db(transaction=True)
def test_kb_lists_competitions_enters_one_and_shows_its_standings(
    tmp_path, live_site, user, relu_problem, cpu_hardware
):
    now = timezone.now()
    competition = Competition.objects.create(
        slug="relu-cup", title="ReLU cup", hardware=cpu_hardware, daily_limit=1,
        starts_at=now - timedelta(hours=1), ends_at=now + timedelta(days=1), published=True,
    )
    competition.problems.set([relu_problem])
    login = kb("login", "--url", live_site, "--token", token_for(user), home=tmp_path)
    assert login.returncode == 0, login.stderr

    listed = kb("competitions", home=tmp_path)
    assert listed.returncode == 0 and "relu-cup" in listed.stdout and "running" in listed.stdout
    entered = kb("enter", "relu-cup", str(KERNELS / "relu_correct.py"), "--problem",
                 relu_problem.slug, "--backend", "torch", home=tmp_path)
    assert entered.returncode == 0, entered.stderr
    entry = Entry.objects.get()
    assert entered.stdout.strip() == str(entry.submission_id)
    again = kb("enter", "relu-cup", str(KERNELS / "relu_correct.py"), "--problem",
               relu_problem.slug, "--backend", "torch", home=tmp_path)
    assert again.returncode == 1 and "today's 1 entries" in again.stderr

    standings = kb("standings", "relu-cup", home=tmp_path)
    assert standings.returncode == 0, standings.stderr
    assert "ReLU cup on cpu (running)" in standings.stdout and "ada" in standings.stdout
