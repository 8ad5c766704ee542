"""Nothing a test run starts outlives it, also when the run is stopped mid-way.

`make test` stopped by a time limit (SIGTERM to make, which ends its recipe's shell) must leave
no runner, django-q cluster, daphne, judge or bubblewrap sandbox behind: tests/environment.py
makes pytest a child subreaper that kills everything below it when it is told to end, and when
the shell that started it dies (KB_TESTS_DIE_WITH_PARENT, set by the Makefile).
"""

import os
import shutil
import signal
import subprocess
import sys

from tests.conftest import REPO, wait_for
from tests.environment import descendants

# A test with a real runner whose sandboxed child runs a kernel for several seconds.
INNER = (
    "tests/test_runner_recovery.py::"
    "test_a_submission_whose_runner_was_killed_is_evaluated_exactly_once_by_the_next_runner"
)


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def below(pid: int) -> list[str]:
    return [cmdline(child) for child in descendants(pid)]


def test_a_run_stopped_mid_evaluation_leaves_no_process_of_the_project(tmp_path):
    """Slow: a real pytest run, stopped while its runner's sandbox runs a kernel, as make
    stopped by a time limit stops it; only real processes can be left behind."""
    already = set(descendants())
    env = {
        **os.environ,
        # The inner run's database in this test's folder: killed, it removes nothing itself.
        "SQLITE_TEST_PATH": str(tmp_path / "inner-db.sqlite3"),
        "KB_TESTS_DIE_WITH_PARENT": "1",
    }
    env.pop("PYTEST_CURRENT_TEST", None)
    with open(tmp_path / "inner.log", "w") as log:
        # The Makefile's recipe: a shell, and pytest below it.
        shell = subprocess.Popen(
            ["bash", "-c", '"$0" -m pytest -p no:cacheprovider -q "$1"; echo "pytest: $?"',
             sys.executable, INNER],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        busy = "bwrap" if shutil.which("bwrap") else "manage.py runner"
        wait_for(lambda: any(busy in line for line in below(shell.pid)), timeout=240)
        assert any("manage.py runner" in line for line in below(shell.pid))
        os.kill(shell.pid, signal.SIGTERM)  # what make does to its recipe's shell
        shell.wait(timeout=30)

        def left() -> list[str]:
            return [cmdline(pid) for pid in set(descendants()) - already]

        # Orphans come to this process (a subreaper too), so anything left shows here.
        try:
            wait_for(lambda: not left(), timeout=30, interval=0.5)
        except AssertionError:
            raise AssertionError(f"left running: {left()}") from None
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
    assert "pytest: 0" not in (tmp_path / "inner.log").read_text()  # it was stopped, not done
