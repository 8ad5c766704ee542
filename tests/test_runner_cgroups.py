"""The runner's self-test line on per-evaluation cgroups (issue 63): one evaluation's memory and
processes bounded as a sum, or each process and /tmp on their own; without the first a runner
refuses to serve unless the operator allows it (RUNNER_REQUIRE_CGROUPS=0); `make run`'s runner
serves with a warning (tests/test_run_embedded.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management.base import CommandError

from evaluator.runner import limits
from gpu_runner.management.commands.runner import per_evaluation_limits_line

REPO = Path(__file__).resolve().parent.parent


def test_with_a_cgroup_of_its_own_per_evaluation_the_line_says_so(monkeypatch):
    monkeypatch.setattr(limits, "cgroup_parent", lambda: ("/sys/fs/cgroup/kb", ""))
    line = per_evaluation_limits_line()
    assert line.startswith("per-evaluation cgroups: yes, under /sys/fs/cgroup/kb")
    assert "bounded as a sum" in line


def test_without_one_the_runner_refuses_to_serve_and_says_why_and_how(monkeypatch, settings):
    settings.RUNNER_REQUIRE_CGROUPS = True
    monkeypatch.setattr(limits, "cgroup_parent", lambda: (None, "no cgroup v2 here"))
    with pytest.raises(CommandError) as refused:
        per_evaluation_limits_line()
    text = str(refused.value)
    assert "per-evaluation cgroups: no (no cgroup v2 here)" in text
    assert "KB_CGROUP_ROOT" in text and "RUNNER_REQUIRE_CGROUPS=0" in text


def test_allowed_by_the_operator_it_serves_with_a_warning(monkeypatch, settings):
    settings.RUNNER_REQUIRE_CGROUPS = False
    monkeypatch.setattr(limits, "cgroup_parent", lambda: (None, "no cgroup v2 here"))
    line = per_evaluation_limits_line()
    assert line.startswith("warning: per-evaluation cgroups: no (no cgroup v2 here)")


@pytest.mark.skipif(limits.cgroup_parent()[0] is not None,
                    reason="this host gives the runner per-evaluation cgroups")
def test_a_real_runner_without_cgroups_exits_at_start_with_the_line(tmp_path):
    """A real `manage.py runner` process (its exit status and what it prints are what an
    operator sees), on a host without a cgroup v2 memory controller for it, as this one and CI:
    it stops before it registers or claims anything."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "kbsite.settings",
           "SQLITE_PATH": str(tmp_path / "db.sqlite3"), "RUNNER_REQUIRE_CGROUPS": "1",
           "SECRET_KEY": "a-test-key-" + "x" * 40}
    env.pop("KB_CGROUP_ROOT", None)
    result = subprocess.run([sys.executable, "manage.py", "runner", "--hardware", "cpu"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "per-evaluation cgroups: no" in result.stderr + result.stdout
    assert "RUNNER_REQUIRE_CGROUPS=0" in result.stderr + result.stdout
