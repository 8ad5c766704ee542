"""Shared fixtures: real processes (runner, web server, browser) on the real test database file,
the stand-in harness, and the two tiers of the suite.

Tiers: a test is `slow` when it starts real processes (a runner, daphne, chromium, the sandbox)
or belongs to the exploit and attack suites; `make test-fast` (`pytest -m "not slow"`) runs the
rest, in process, and each of those must finish its call within a budget (TEST_BUDGET_S, or
`@pytest.mark.budget(seconds)` with a reason where one needs more), or it fails with its duration.
"""

import contextlib
import dis
import inspect
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection
from django_q.brokers import get_broker
from django_q.signing import SignedPackage

from evaluation.services import hardware_register
from evaluator.runner import sandbox
from gpu_runner.curation import (
    baselines_compile_ahead,
    baselines_measure,
    validate_problem,
    validations_run,
)
from gpu_runner.detect import detect
from problems.services import samples_load
from tests.environment import die_with_parent

REPO = Path(__file__).resolve().parent.parent


class QuickPasswordHasher(PBKDF2PasswordHasher):
    """PBKDF2 with one iteration: a million take most of a second on CI's cores, and most tests
    make a user. Its hashes are still `pbkdf2_sha256$1$...`, which the processes the tests start
    (daphne, runners: the default hashers) verify, since PBKDF2 reads its iterations from the
    hash."""

    iterations = 1


settings.PASSWORD_HASHERS = ["tests.conftest.QuickPasswordHasher"]
# The KernelBench problem set that sits beside the repository (shared/kernelbench).
KERNELBENCH = Path(os.environ.get("KERNELBENCH_PATH", REPO.parent / "shared" / "kernelbench"))
KERNELS = Path(__file__).resolve().parent / "kernels"


# ---- the two tiers -------------------------------------------------------------------------------

# Fixtures that start real processes: a test that uses one is slow.
SLOW_FIXTURES = frozenset(
    {"start_runner", "live_site", "browser", "page_site", "site_url", "start_generation_cluster"}
)
# Markers of end-to-end tests: real runners, browsers, the scaled setup's services.
SLOW_MARKERS = ("browser", "integration", "scaled", "gpu")
# The exploit and attack suites: every case is a real evaluation in the real sandbox.
SLOW_FOLDERS = ("exploits", "sandbox")
# A test (or a helper of its module it calls) that refers to one of these starts processes.
PROCESS_STARTERS = (
    sandbox.run_job,
    subprocess.Popen,
    subprocess.run,
    subprocess.call,
    subprocess.check_call,
    subprocess.check_output,
)
# The runner's curation entry points run the real sandbox unless the stand-in harness replaces
# it (the `harness` fixture).
SANDBOX_SERVICES = (validate_problem, validations_run, baselines_compile_ahead, baselines_measure)
# Tests slow for another reason than a process they start (or in folders whose files others
# keep), each with what makes it slow; a node id, or the start of one.
SLOW_TESTS = {
    "tests/test_baselines.py": "measures baselines in the real sandbox, torch.compile included",
    "tests/test_fuzz_schema.py": "schemathesis: hundreds of generated requests per operation",
    "tests/test_security_authz.py::test_an_ordinary_user_changes_nothing_admins_curate_or_": (
        "every route of the site, with every method"
    ),
    "tests/test_security_authz.py::test_no_route_lets_even_an_admin_write_an_evaluation_": (
        "every route of the site, with every method"
    ),
    "tests/test_import_kernelbench.py::test_importing_kernelbench_yields_270_problems": (
        "imports the whole KernelBench folder, twice"
    ),
    "tests/test_curation_transfer.py::test_the_committed_h200_curation_covers_every_level_3": (
        "reads every level 3 problem of KernelBench"
    ),
    "tests/harness/test_diagnose.py::test_a_matmul_on_tf32": (
        "matmuls large enough to show TF32's rounding"
    ),
    "tests/harness/test_diagnose.py::test_a_truncating_tf32_kernel": (
        "matmuls large enough to show TF32's rounding"
    ),
    "tests/harness/test_diagnose.py::test_a_plain_bug_gets_no_precision_hint": (
        "matmuls large enough to show TF32's rounding"
    ),
    "tests/test_problem_validation.py::test_the_command_validates_here_in_batches": (
        "the command runs its validations in the real sandbox"
    ),
    "tests/harness/test_diagnose.py::test_fp16_": "matmuls large enough to show fp16's rounding",
    "tests/harness/test_diagnose.py::test_an_error_only_as_large_as_tf32s": (
        "matmuls large enough to show TF32's rounding"
    ),
    "tests/harness/test_diagnose.py::test_the_reference_is_recomputed_only": (
        "matmuls large enough to show TF32's rounding"
    ),
    "tests/harness/test_speed_timing.py::test_the_default_stop_rule_keeps_5_repeated_medians": (
        "times real kernels until five medians agree"
    ),
}
# The call phase's budget in the fast tier, in seconds (0: no budget).
TEST_BUDGET_S = float(os.environ.get("TEST_BUDGET_S", "2"))


def _starts_processes(function, seen: set | None = None) -> bool:
    """Whether `function`, or a function of the tests' own modules it calls, names a way of
    starting a process (the sandbox's run_job, subprocess, the runner's curation services):
    read from its code (the globals it loads, and attributes of the modules among them), not
    run."""
    seen = set() if seen is None else seen
    code = getattr(function, "__code__", None)
    if code is None or code in seen:
        return False
    seen.add(code)
    names = getattr(function, "__globals__", {})
    starters = (*PROCESS_STARTERS, *SANDBOX_SERVICES)
    codes = [code]
    while codes:
        current = codes.pop()
        codes.extend(c for c in current.co_consts if hasattr(c, "co_code"))  # lambdas, inner defs
        loaded = None  # the module a global just loaded names, for `module.attribute`
        for instruction in dis.get_instructions(current):
            if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                value = names.get(instruction.argval)
            elif instruction.opname in ("LOAD_ATTR", "LOAD_METHOD") and loaded is not None:
                value = getattr(loaded, instruction.argval, None)
            else:
                loaded = None
                continue
            loaded = value if inspect.ismodule(value) else None
            if value is subprocess or any(value is starter for starter in starters):
                return True
            ours = inspect.isfunction(value) and value.__module__.startswith("tests.")
            if ours and _starts_processes(value, seen):
                return True
    return False


def is_slow(item: pytest.Item) -> bool:
    if item.get_closest_marker("slow"):
        return True
    if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    if any(item.get_closest_marker(name) for name in SLOW_MARKERS):
        return True
    if any(item.nodeid.startswith(node) for node in SLOW_TESTS):
        return True
    parts = Path(str(item.path)).relative_to(REPO / "tests").parts
    if parts[0] in SLOW_FOLDERS:
        return True
    if "harness" in getattr(item, "fixturenames", ()) and parts[0] != "harness":
        return False  # the stand-in harness: nothing is started
    # The test itself, and the fixtures it uses (a module's fixture may start the process).
    fixtures = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    functions = [getattr(item, "function", None)]
    functions += [d.func for defs in fixtures.values() for d in defs]
    return any(_starts_processes(function) for function in functions)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if is_slow(item) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    # The browser tests last, together: they share one chromium for the whole session (started
    # at the first, closed at the end), and Playwright's event loop then meets no asyncio test.
    items.sort(key=lambda item: "browser" in getattr(item, "fixturenames", ()))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A fast-tier test over its budget fails with its duration."""
    report = yield
    if call.when != "call" or not report.passed or item.get_closest_marker("slow"):
        return report
    marker = item.get_closest_marker("budget")
    budget = float(marker.args[0]) if marker else TEST_BUDGET_S
    # A machine busy with other work stretches every test: the budget stretches with the load
    # (the last minute's load average per core), so only the test's own slowness fails it.
    stretch = max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    if budget and report.duration > budget * stretch:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} took {report.duration:.2f} s, over the fast tier's budget of "
            f"{budget:g} s (x{stretch:.1f} for the machine's load): make it faster, give it a "
            "budget of its own (@pytest.mark.budget(seconds), with the reason), or, where only "
            "a real process shows what it tests, mark it slow and say so in its docstring."
        )
    return report


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
            # This host and CI give the runner no cgroup v2 memory controller.
            "RUNNER_REQUIRE_CGROUPS": "0",
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


def stop_process(process: subprocess.Popen, *, sig: int = signal.SIGTERM,
                 grace: float = 5.0) -> None:
    """Stop a process started in its own group, and everything it started: `sig`, then after
    `grace` seconds SIGKILL to the group (a judge dies with the runner that started it)."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=grace)  # queue workers can take long to wind down
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


# A test's processes at its end: nothing of theirs is looked at after it, and a runner's queue
# cluster took more than 5 s to wind down every time (a sixth of the slow tier's time went on
# these waits). Signalled together, then killed after a second.
TEARDOWN_GRACE_S = 1.0


def stop_processes(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        stop_process(process, grace=TEARDOWN_GRACE_S)


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
def fresh_throttles():
    """Every test starts with an empty cache: the API's throttles and the login lockout count
    there, and one test's requests must not spend the next one's allowance."""
    from django.core.cache import cache

    cache.clear()


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


def start_process(args: list[str], *, log: Path, env: dict[str, str]) -> subprocess.Popen:
    """Start a process of the project in its own session and process group (so stop_process
    ends it and everything it started), writing its output to `log`.

    Started from the main thread it also gets SIGTERM when this test process dies, even by
    SIGKILL; tests/environment.py ends whatever is left at the end of the run in any case.
    """
    main = threading.current_thread() is threading.main_thread()
    with open(log, "w") as out:
        return subprocess.Popen(
            args,
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # The death signal follows the thread that forks: not one of asgiref's threads,
            # which may end before the process it started is done with.
            preexec_fn=die_with_parent if main else None,
        )


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def start_daphne(log: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """The real ASGI server (daphne) on a free port; returns the process and its URL."""
    port = free_port()
    process = start_process(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
         "kbsite.asgi:application"],
        log=log,
        env=env,
    )
    try:
        wait_for(lambda: _listening(port) or process.poll() is not None, timeout=60)
    except AssertionError:
        stop_process(process)
        raise
    assert process.poll() is None, f"daphne ended at start: {log.read_text()[-2000:]}"
    return process, f"http://127.0.0.1:{port}"


@pytest.fixture
def start_runner(tmp_path) -> Iterator[Callable[..., subprocess.Popen]]:
    """Start real `manage.py runner` processes (each in its own process group)."""
    started: list[subprocess.Popen] = []

    def start(hardware: str = "cpu", *args: str, **env: str) -> subprocess.Popen:
        process = start_process(
            [sys.executable, "manage.py", "runner", "--hardware", hardware, *args],
            log=tmp_path / f"runner-{len(started)}.log",
            env=process_env(**env),
        )
        started.append(process)
        return process

    yield start
    stop_processes(started)


@pytest.fixture(scope="session")
def _live_site_process(django_db_setup, tmp_path_factory) -> Iterator[tuple[subprocess.Popen, str]]:
    # One server for the whole run: each test's rows are its own (the tests that use it are
    # transactional, and the server reads the same database file), and starting daphne costs
    # seconds of Django's start-up each time.
    process, url = start_daphne(tmp_path_factory.mktemp("daphne") / "daphne.log", process_env())
    yield process, url
    stop_process(process)


@pytest.fixture
def live_site(_live_site_process) -> str:
    """The real ASGI server (daphne), shared by the run's tests, serving this run's database."""
    process, url = _live_site_process
    assert process.poll() is None, "the shared daphne has ended (see its log in pytest's tmp)"
    return url


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium driven by Playwright (no browser download), one for the whole run;
    each test opens its own pages (`browser.new_page()`: a fresh context, no shared cookies).
    The tests that use it run last (pytest_collection_modifyitems)."""
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


def take_queued_tasks(queue: str = "cpu") -> Iterator[dict]:
    """The tasks queued for `queue`, taken off its broker (the ORM's, or Redis on the scaled
    setup) as a runner's cluster takes them: {"func": ..., "args": ..., "kwargs": ...}."""
    broker = get_broker(queue)
    while batch := broker.dequeue():
        for ack, package in batch:
            broker.acknowledge(ack)
            yield SignedPackage.loads(package)


# ---- the stand-in harness ------------------------------------------------------------------------


def stats(median_ms: float) -> dict:
    return {
        "median_ms": median_ms,
        "mean_ms": median_ms,
        "std_ms": 0.01,
        "min_ms": median_ms * 0.9,
        "max_ms": median_ms * 1.2,
        "n": 20,
    }


class FakeHarness:
    """Stands in for the sandboxed child: answers each job with the next canned result.

    The runner's services (claiming, leases, storing, re-verification, boards, events) run for
    real around it; the harness itself, and the runner process, have their own (slow) tests.
    A job with no canned answer left fails the test: nothing is evaluated unexpectedly.
    """

    def __init__(self) -> None:
        self.jobs: list[dict] = []
        self.answers: list[dict] = []
        # Progress events sent to on_event before each answer, as the judge sends its phases.
        self.events: list[dict] = []

    def will_return(self, *, verdict: str = "correct", ms: float = 1.0, flags=()) -> None:
        self.answers.append({"verdict": verdict, "ms": ms, "flags": list(flags)})

    def will_answer(self, result: dict) -> None:
        """The next job gets `result` as it is (a validation's, a baseline's)."""
        self.answers.append({"result": result})

    def run_job(self, job: dict, on_event=None, stop=None) -> dict:
        self.jobs.append(job)
        assert self.answers, f"the stand-in harness has no answer left for job {len(self.jobs)}"
        answer = self.answers.pop(0)
        for event in self.events:
            if on_event:
                on_event(dict(event))
        if "result" in answer:
            return dict(answer["result"])
        correct = answer["verdict"] == "correct"
        return {
            "verdict": answer["verdict"],
            "correct": correct,
            "error": "" if correct else "trial 1: the outputs differ from the reference",
            "trials": [{"k": 1, "passed": correct}],
            "candidate": stats(answer["ms"]),
            "reference": stats(2.0),
            "speedup": 2.0 / answer["ms"] if correct else None,
            "flags": answer["flags"],
            "seeds": {"server": job["seed"]},
        }


@pytest.fixture
def harness(monkeypatch) -> FakeHarness:
    """The runner's services in this process, with the sandboxed child replaced by canned
    results (FakeHarness)."""
    fake = FakeHarness()
    monkeypatch.setattr(sandbox, "run_job", fake.run_job)
    return fake
