"""The attack suite's arena: a real runner with canaries planted around it, the users involved,
and the checks every attack ends with.

Each test gets its own runner (`manage.py runner`, as tests/conftest.py's `start_runner` starts
it) whose environment holds canary secrets (KB_CANARY, SECRET_KEY), whose var/ folder (a fresh
one, KBSITE_VAR_DIR) holds a canary admin password and secret key file, whose build cache
(BUILD_CACHE_DIR) is fresh, and whose database holds a canary user and that user's private
submission. Attack kernels (kernels/) are rendered with string.Template: `$config` becomes the
JSON of what an attacker knows of the (open-source) layout: the checkout, the runner's var/ and
build cache, the database file, the runner's pid, a per-test tag. Canaries are never put into
an attacker's source, so that finding one in what is stored about it means it was read.

Against an unsandboxed runner these attacks really run, as the runner's user: they only touch
the runner's own process tree (see `in_scope` in the kernels), write uniquely named inert files,
and the `arena` fixture removes whatever carries the test's tag afterwards (files and
processes), wherever a kernel could have left it.

KB_SANDBOX_TEST_DEVICE=cuda (scripts/gpu_check.sh sandbox) runs the same tests through a runner
serving the host's GPU; the kernels use their input's device.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import site
import string
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Q

from submissions.models import Evaluation, Submission
from submissions.services import submission_create
from tests.conftest import REPO, kernel_source, wait_for

DEVICE = os.environ.get("KB_SANDBOX_TEST_DEVICE", "cpu")
KERNELS = Path(__file__).resolve().parent / "kernels"
HONEST = kernel_source("relu_correct.py")
EVALUATION_TIMEOUT = 240
LARGE = 100 * 1024 * 1024  # a file this big left behind is the attack's


# A kernel's import of the shared prelude, one line or parenthesized over several.
_PRELUDE_IMPORT = re.compile(r"^from \.common import (\([^)]*\)|[^\n]*)$", re.MULTILINE)


def render(name: str, **config: Any) -> str:
    """An attack kernel as one file, as it is submitted: the shared prelude (common.py) in
    place of its import, and what the attacker knows filled in."""
    kernel = (KERNELS / f"{name}.py").read_text()
    prelude = (KERNELS / "common.py").read_text()
    kernel, found = _PRELUDE_IMPORT.subn(lambda _: prelude, kernel, count=1)
    assert found, f"{name}.py does not import the shared prelude"
    return string.Template(kernel).substitute(config=json.dumps(config))


def row(obj) -> dict[str, Any]:
    """Every stored column of a model instance."""
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


def dump(*objs) -> str:
    return json.dumps([row(o) for o in objs], default=str, sort_keys=True)


def attack_report(evaluation: Evaluation) -> dict[str, str]:
    """The kernel's `KB-ATTACK {...}` line, from what was stored of its output."""
    for text in (evaluation.logs, evaluation.compile_log, evaluation.error, evaluation.traceback):
        for line in (text or "").splitlines():
            if "KB-ATTACK {" in line:
                return json.loads(line.split("KB-ATTACK ", 1)[1])
    raise AssertionError(
        f"the attack kernel printed no KB-ATTACK line (verdict {evaluation.verdict}: "
        f"{evaluation.error[:300]!r}; logs {evaluation.logs[-500:]!r})")


def tagged_processes(tag: str) -> list[int]:
    """Live processes marked by the attack (its tag in the command line or the environment)."""
    marks = (f"kb-attack-{tag}".encode(), f"KB_ATTACK_TAG={tag}".encode())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                    continue  # a zombie holds no resources and runs nothing
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
        except (OSError, IndexError):
            continue
        if any(m in cmdline or m in environ.split(b"\0") for m in marks):
            found.append(int(entry))
    return found


def host_code_folders() -> list[Path]:
    """Where a persisting kernel would drop code, as the runner's interpreter sees them."""
    folders = [Path(p) for p in site.getsitepackages()]
    with contextlib.suppress(Exception):
        folders.append(Path(site.getusersitepackages()))
    for base in (sys.prefix, sys.base_prefix):
        paths = sysconfig.get_paths(vars={"base": base, "platbase": base})
        folders += [Path(base), Path(paths["purelib"]), Path(paths["platlib"])]
    folders += [Path(p) for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    folders += [REPO, REPO / "evaluation" / "harness"]
    return list(dict.fromkeys(folders))


@dataclass
class Canaries:
    env: str = field(default_factory=lambda: f"kbcanary-env-{secrets.token_hex(8)}")
    secret_key: str = field(default_factory=lambda: f"kbcanary-key-{secrets.token_hex(16)}")
    admin_password: str = field(default_factory=lambda: f"kbcanary-pw-{secrets.token_hex(8)}")
    secret_key_file: str = field(default_factory=lambda: f"kbcanary-kf-{secrets.token_hex(8)}")
    username: str = field(default_factory=lambda: f"kbcanary_user_{secrets.token_hex(6)}")
    private_source: str = field(default_factory=lambda: f"kbcanary-src-{secrets.token_hex(8)}")

    @property
    def email(self) -> str:
        return f"{self.username}@example.org"

    def values(self) -> list[str]:
        return [self.env, self.secret_key, self.admin_password, self.secret_key_file,
                self.username, self.private_source]


class Arena:
    """One runner and everything the attack tests need around it."""

    def __init__(self, *, tmp_path: Path, start_runner, hardware, problem,
                 runner_env: dict[str, str] | None = None) -> None:
        self.tag = secrets.token_hex(6)
        self.canaries = Canaries()
        self.hardware = hardware
        self.problem = problem
        self.tmp_path = tmp_path
        self.var_dir = tmp_path / "var"
        self.var_dir.mkdir()
        self.build_cache = self.var_dir / "build-cache"
        for name, text in (("admin-password", self.canaries.admin_password),
                           ("secret-key", self.canaries.secret_key_file)):
            (self.var_dir / name).write_text(text + "\n")
            (self.var_dir / name).chmod(0o600)
        users = get_user_model()
        self.attacker = users.objects.create_user(username="mallory",
                                                  password="an-attackers-passphrase-1")
        self.victim = users.objects.create_user(username="victoria",
                                                password="a-victims-passphrase-1")
        self.honest = users.objects.create_user(username="hank", password="an-honest-pass-1")
        owner = users.objects.create_user(username=self.canaries.username,
                                          email=self.canaries.email,
                                          password="a-canary-passphrase-1")
        # A private kernel of someone else: stored, finished, never queued.
        private = f"# {self.canaries.private_source}\n" + HONEST
        Submission.objects.create(
            user=owner, problem=problem, problem_version_id=problem.current_version_id,
            hardware=hardware, backend="torch", source=private,
            source_hash=secrets.token_hex(32), status=Submission.Status.FINISHED,
            verdict="correct")
        self.runner = start_runner(
            hardware.slug,
            # The victim's cold C++ build alone took 100 s on a 2-core CI machine (a cold nvcc
            # build longer still): more than the other tests' 60 s. No attack here waits for
            # the limit, so only that build takes the room.
            EVALUATION_TIME_LIMIT=os.environ.get("EVALUATION_TIME_LIMIT", "300"),
            KBSITE_VAR_DIR=str(self.var_dir),
            BUILD_CACHE_DIR=str(self.build_cache),
            KB_CANARY=self.canaries.env,
            SECRET_KEY=self.canaries.secret_key,
            **(runner_env or {}),
        )
        self.runner_log = tmp_path / "runner-0.log"

    # --- what an attacker knows ------------------------------------------------------------

    def config(self, **extra: Any) -> dict[str, Any]:
        from django.db import connection

        return {
            "repo": str(REPO),
            "var_dir": str(self.var_dir),
            "build_cache_dir": str(self.build_cache),
            "sqlite_path": str(connection.settings_dict["NAME"]),
            "runner_pid": self.runner.pid,
            "username": self.attacker.username,
            "tag": self.tag,
            **extra,
        }

    def attack(self, name: str, **extra: Any) -> Submission:
        """Submit the attack kernel `name` as the attacker and wait for its evaluation."""
        return self.evaluate(self.attacker, render(name, **self.config(**extra)))

    # --- submitting and waiting ------------------------------------------------------------

    def evaluate(self, user, source: str, backend: str = "torch",
                 timeout: float = EVALUATION_TIMEOUT) -> Submission:
        submission = submission_create(user=user, problem=self.problem, source=source,
                                       backend=backend, hardware=self.hardware)
        def finished() -> bool:
            if self.runner.poll() is not None:
                raise AssertionError(f"the runner died; its log ends: "
                                     f"{self.runner_log.read_text()[-1500:]}")
            return Submission.objects.get(pk=submission.pk).status == Submission.Status.FINISHED

        try:
            wait_for(finished, timeout=timeout, interval=0.3)
        except AssertionError as error:
            if "runner died" in str(error):
                raise
            raise AssertionError(
                f"submission {submission.pk} not finished within {timeout} s; runner "
                f"{'alive' if self.runner.poll() is None else 'dead'}; its log ends: "
                f"{self.runner_log.read_text()[-1500:]}") from None
        submission.refresh_from_db()
        return submission

    # --- the checks every attack ends with -------------------------------------------------

    def assert_rejected(self, submission: Submission) -> Evaluation:
        """Its verdict is not correct and it ranks nowhere."""
        from leaderboard.models import BestEntry

        evaluation = submission.latest_evaluation
        assert evaluation is not None
        assert evaluation.verdict != "correct" and not evaluation.correct, (
            f"the attack's evaluation was stored as {evaluation.verdict} (speedup "
            f"{evaluation.speedup}): its own verdict was forged")
        assert submission.verdict != "correct"
        assert not evaluation.ranks
        assert not BestEntry.objects.filter(
            Q(submission=submission) | Q(evaluation__submission=submission)
            | Q(pending_evaluation__submission=submission), rank__isnull=False).exists()
        return evaluation

    def assert_blocked(self, report: dict[str, str], expected: list[str]) -> None:
        """Each attempt said it was blocked (however: an exception, nothing visible, EPERM...);
        `info_*` entries are for the record only."""
        print(f"KB-ATTACK report: {report}")  # shown with -s or -rA
        missing = [key for key in expected if key not in report]
        assert not missing, f"the kernel did not report {missing} (report: {report})"
        succeeded = {k: v for k, v in report.items()
                     if not k.startswith("info_") and not v.startswith("blocked")}
        assert not succeeded, f"attempts not blocked: {succeeded}"

    def assert_no_canary(self, *objs, extra: list[str] = ()) -> None:
        """No stored field of these rows holds a canary."""
        text = dump(*objs)
        found = [value for value in [*self.canaries.values(), *extra] if value in text]
        assert not found, f"canaries in what was stored: {found}"

    def rows_of(self, submission: Submission) -> list[Any]:
        submission.refresh_from_db()
        return [submission, *Evaluation.objects.filter(submission=submission)]

    def assert_honest_next_is_correct(self, user=None) -> Submission:
        """The runner carries on: the next honest kernel on it is judged correct, and nothing
        of the attack (its text, a canary) is in what is stored of it."""
        assert self.runner.poll() is None, "the runner died"
        honest = self.evaluate(user or self.honest, HONEST)
        evaluation = honest.latest_evaluation
        assert evaluation.verdict == "correct", (
            f"the next honest kernel came back {evaluation.verdict}: {evaluation.error[:300]!r}")
        text = dump(*self.rows_of(honest))
        assert "KB-ATTACK" not in text and self.tag not in text, (
            "the attack's text is in the next honest evaluation")
        self.assert_no_canary(*self.rows_of(honest))
        assert self.runner.poll() is None, "the runner died"
        return honest

    def finish(self, submission: Submission, expected: list[str]) -> dict[str, str]:
        """The checks after each attack: rejected, every attempt blocked, no canary stored,
        the attacker still an ordinary user, and the next honest evaluation correct."""
        evaluation = self.assert_rejected(submission)
        report = attack_report(evaluation)
        self.assert_blocked(report, expected)
        self.assert_no_canary(*self.rows_of(submission))
        self.attacker.refresh_from_db()
        assert not (self.attacker.is_superuser or self.attacker.is_staff), (
            "the attacker made itself staff or superuser")
        assert not self.leftover_processes(), "processes of the attack outlived its evaluation"
        assert not self.tagged_files(), f"the attack left files: {self.tagged_files()}"
        self.assert_honest_next_is_correct()
        return report

    # --- afterwards ------------------------------------------------------------------------

    def leftover_processes(self, grace: float = 5.0) -> list[int]:
        deadline = time.monotonic() + grace
        while (found := tagged_processes(self.tag)) and time.monotonic() < deadline:
            time.sleep(0.2)
        return found

    def tagged_files(self) -> list[Path]:
        """Files the attacks may have left: named with the tag, or large, anywhere a kernel
        could write to from the sandbox or from an unsandboxed runner."""
        found: list[Path] = []
        for folder in [*host_code_folders(), Path("/tmp"), REPO / "var"]:
            with contextlib.suppress(OSError):
                found += [p for p in folder.iterdir() if self.tag in p.name]
        for root in (self.build_cache, self.var_dir, REPO / "var" / "build-cache"):
            if root.is_dir():
                for path in root.rglob("*"):
                    with contextlib.suppress(OSError):
                        if path.is_file() and not path.is_symlink() and (
                                self.tag in path.name or path.stat().st_size > LARGE):
                            found.append(path)
        return list(dict.fromkeys(found))

    def cleanup(self) -> None:
        for pid in tagged_processes(self.tag):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for path in self.tagged_files():
            with contextlib.suppress(OSError):
                path.unlink()


@pytest.fixture
def hardware(request):
    if DEVICE == "cpu":
        return request.getfixturevalue("cpu_hardware")
    import torch

    if not torch.cuda.is_available():
        pytest.skip(f"KB_SANDBOX_TEST_DEVICE={DEVICE} but no CUDA device here")
    from evaluation.services import hardware_register
    from gpu_runner.detect import detect

    detected = detect()
    slug = detected.pop("slug")
    return hardware_register(slug=slug, **detected)


@pytest.fixture
def runner_env() -> dict[str, str]:
    """More of the arena runner's environment (a test module's own limits)."""
    return {}


@pytest.fixture
def arena(transactional_db, tmp_path, start_runner, hardware, relu_problem, settings,
          monkeypatch, runner_env):
    arena = Arena(tmp_path=tmp_path, start_runner=start_runner, hardware=hardware,
                  problem=relu_problem, runner_env=runner_env)
    # The queue's tasks are signed with the secret key: this process signs with the runner's.
    from django_q.conf import Conf

    settings.SECRET_KEY = arena.canaries.secret_key
    monkeypatch.setattr(Conf, "SECRET_KEY", arena.canaries.secret_key)
    try:
        yield arena
    finally:
        arena.cleanup()


def compiled_victim_source(canary: str) -> tuple[str, str]:
    """An honest compiled ReLU (tests/harness's, C++ on the CPU, CUDA on a GPU) whose C++
    source carries a canary comment (it lands in the build folder); and its backend."""
    from tests.harness import problems

    if DEVICE == "cpu":
        source, marker, backend = problems.CPP_RELU, 'source = """', "cpp"
    else:
        source, marker, backend = problems.CUDA_RELU, 'cuda_source = """', "cuda"
    assert marker in source
    return source.replace(marker, f"{marker}\n// kb-victim-secret: {canary}", 1), backend



def host_room() -> dict[str, int]:
    """The host's free disk (where evaluations' folders and build slots are made) and memory,
    and its shared memory in use (tmpfs and memfd pages), in MiB."""
    import shutil
    import tempfile

    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, _, value = line.partition(":")
            info[name] = int(value.split()[0]) // 1024
    return {"disk_free_mb": shutil.disk_usage(tempfile.gettempdir()).free // 2**20,
            "memory_available_mb": info.get("MemAvailable", 0), "shmem_mb": info.get("Shmem", 0),
            "evaluator_processes": len(evaluator_processes())}


def host_processes() -> list[tuple[str, str, Path]]:
    """The host's processes as (pid, command line, /proc entry); those gone while read are
    skipped."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append((entry.name, cmd, entry))
    return found


def evaluator_processes() -> list[str]:
    """The host's processes of the evaluator (judges, spares, workers: their command lines name
    an `evaluator` module). On a GPU each holds a CUDA context, so one left over is room that
    does not come back; on the CPU it is small enough to hide in the memory's tolerance."""
    return [f"{pid} {cmd[:160]}" for pid, cmd, _ in host_processes()
            if "evaluator." in cmd and "pytest" not in cmd]


def settled_room(*, quiet_s: float = 2.0, timeout_s: float = 45.0, memory_mb: int = 48,
                 shmem_mb: int = 8) -> dict[str, int]:
    """The host's room once it stops moving: after an evaluation the runner's next spare judge
    is still starting (on a GPU its three processes take about 1.5 GiB with their CUDA
    contexts, seen on the H200), and room read then is room the spare takes later."""
    samples: list[tuple[float, dict[str, int]]] = []
    deadline = time.monotonic() + timeout_s
    while True:
        now, room = time.monotonic(), host_room()
        samples = [(t, r) for t, r in samples if t >= now - quiet_s] + [(now, room)]
        window = [r for _, r in samples]
        if samples[0][0] <= now - quiet_s + 0.3 and (
                max(r["memory_available_mb"] for r in window)
                - min(r["memory_available_mb"] for r in window) <= memory_mb
                and max(r["shmem_mb"] for r in window)
                - min(r["shmem_mb"] for r in window) <= shmem_mb
                and len({r["evaluator_processes"] for r in window}) == 1):
            return room
        if now > deadline:
            return room
        time.sleep(0.25)


def largest_processes(count: int = 8) -> list[str]:
    """The host's largest processes by resident memory: who holds the room that did not come
    back. (Kernel threads have no VmRSS line and are left out.)"""
    found = []
    for pid, cmd, entry in host_processes():
        with contextlib.suppress(OSError, ValueError):
            rss = next((line.split()[1] for line in (entry / "status").read_text().splitlines()
                        if line.startswith("VmRSS:")), None)
            if rss is not None:
                found.append((int(rss), f"{pid} {int(rss) // 1024} MiB {cmd[:120]}"))
    return [line for _, line in sorted(found, reverse=True)[:count]]


def assert_room_back(before: dict[str, int], *, disk_mb: int = 200, shmem_mb: int = 64,
                     memory_mb: int = 768, wait_s: float = 20.0) -> dict:
    """The host's free disk and memory back to where they were, waited for a while (an
    evaluation's pages go once its processes are). Within tolerances, since the host is shared:
    shared memory (tmpfs and memfd pages, where these attacks put theirs) closely, the memory
    available loosely (a spare judge starting, other work on the host)."""
    deadline = time.monotonic() + wait_s
    while True:
        now = host_room()
        short = {}
        if now["disk_free_mb"] < before["disk_free_mb"] - disk_mb:
            short["disk_free_mb"] = (before["disk_free_mb"], now["disk_free_mb"])
        if now["memory_available_mb"] < before["memory_available_mb"] - memory_mb:
            short["memory_available_mb"] = (before["memory_available_mb"],
                                            now["memory_available_mb"])
        if now["shmem_mb"] > before["shmem_mb"] + shmem_mb:
            short["shmem_mb"] = (before["shmem_mb"], now["shmem_mb"])
        if now["evaluator_processes"] > before["evaluator_processes"]:
            short["evaluator_processes"] = (before["evaluator_processes"],
                                            now["evaluator_processes"])
        if not short or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    print(f"KB-ROOM before {before} after {now}")
    assert not short, (f"the host did not get its room back (MiB, before and after): {short}; "
                       f"its largest processes: {largest_processes()}; "
                       f"the evaluator's: {evaluator_processes()}")
    return now
