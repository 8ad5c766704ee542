"""Loaded before Django's settings (`-p tests.environment` in pyproject.toml's pytest options).

The settings default to DEBUG off, production-like; the tests run in the development setup
(local hosts, a fixed development key, plain static files, cookies over http) unless the
environment says otherwise. Processes the tests start inherit it. Tests of the settings
themselves (tests/test_settings_env.py) start processes with an environment of their own.
"""

import atexit
import ctypes
import os
import shutil
import signal
import tempfile
import time

os.environ.setdefault("DEBUG", "1")
# Runners start by the dozen in the tests: each offers its device kind's backends without the
# start-up self-test (tests/test_backends.py runs the self-test itself, through the sandbox).
os.environ.setdefault("RUNNER_SELF_TEST", "0")
# Nor do they ask for the validations their hardware lacks (a GPU test's runner would queue one
# per published problem beside the work it measures); tests/test_gpu_sharing.py covers that.
os.environ.setdefault("RUNNER_VALIDATE_MISSING", "0")
# A CPU evaluation spends most of its seconds timing (100 calls a side, evaluator/config.py):
# 30 are enough for what the tests check of a runner's evaluations (none compares medians that
# close), and save about 2 s an evaluation over a suite that makes hundreds.
os.environ.setdefault("EVALUATION_MAX_REPS", "30")

# Each test run builds into a cache of its own: an entry kept from an earlier run (same owner
# key, same source) would hand that run's build folder to this one's first evaluation.
if "BUILD_CACHE_DIR" not in os.environ:
    os.environ["BUILD_CACHE_DIR"] = tempfile.mkdtemp(prefix="kbsite-test-build-")
    atexit.register(shutil.rmtree, os.environ["BUILD_CACHE_DIR"], ignore_errors=True)


# ---- nothing a test starts outlives the run ------------------------------------------------------
#
# Tests start real processes (runners and their django-q clusters, daphne, chromium, the
# sandbox's judges and workers), each in a group or session of its own, and some of those start
# groups and sessions of their own again, so no single killpg reaches them all. What does: this
# process is made a child subreaper, so everything started below it stays below it even when its
# parent dies, and at the end of the run (a normal end, Ctrl-C, SIGTERM from a time limit, SIGHUP,
# the parent make dying) every process below it is killed.

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_libc = ctypes.CDLL(None, use_errno=True)


def _children_map() -> dict[int, list[int]]:
    """Parent pid -> child pids of every living (not zombie) process, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                # The command name may hold spaces and parentheses: the fields start after its ")".
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def descendants(root: int | None = None) -> list[int]:
    """Every living process below `root` (default: this one)."""
    children = _children_map()
    found, todo = [], [root or os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _reap() -> None:
    """Collect the exit status of our dead children (orphans handed to us included)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def sweep(*, timeout: float = 10.0) -> list[int]:
    """Kill every process below this one; returns the pids that were found alive."""
    killed: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = descendants()
        if not alive:
            break
        for pid in alive:
            # SIGKILL, not SIGTERM: what is left at this point had its chance to end cleanly,
            # and a stopped or hung process ignores everything else.
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        killed.extend(pid for pid in alive if pid not in killed)
        time.sleep(0.05)
        _reap()
    return killed


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """For a child's preexec_fn: receive `sig` when the process that started it dies."""
    _libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)


def _end_on_signal(signum, frame) -> None:
    sweep()
    # What the run would have cleaned up at its end (the build cache folder, ...), then the
    # signal's own ending, so whoever stopped the run sees it stopped.
    atexit._run_exitfuncs()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install() -> None:
    if _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return  # not Linux, or refused: the fixtures' own process groups still apply
    # make kills its recipe's shell on SIGTERM, not pytest below it: the Makefile asks for
    # SIGTERM here when that shell dies, so a `make test` stopped by a time limit ends its run.
    if os.environ.pop("KB_TESTS_DIE_WITH_PARENT", "") == "1":
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _end_on_signal)
    atexit.register(sweep)


_install()


def pytest_sessionfinish(session, exitstatus) -> None:
    left = sweep()
    if left:
        # Every fixture stops what it started; a process found here is a leak worth knowing of.
        print(f"\ntests/environment.py: ended {len(left)} process(es) left running: {left}")
