"""Fair share under load: four accounts submitting at fixed rates, one ten times the others', to
one real CPU runner, and each account's wait against the bound the fair rule promises.

    .venv/bin/python bench/fair_share.py [--minutes 3] [--sleep 2] [--light-every S] [--keep]

It sets up a throwaway site of its own (a temporary folder: SQLite database, var folder, build
cache, secret key, all through the environment; the site's own database is never touched),
loads the sample problems, starts a real `manage.py runner --hardware cpu` on that database and
submits test runs (untimed) of tests/kernels/relu_slow.py with its sleep set to --sleep seconds,
so every evaluation takes about the same, known time. Two warm-up runs measure it first (T0);
then, for --minutes, three light accounts each submit one every --light-every seconds (default
8 x T0: together well under the runner's capacity) and the heavy account one every tenth of
that (ten times the rate), so the runner is offered about 1.6 times what it can do and the heavy
account's queue grows while the others' must not. After the last submission it waits for every
run to finish, then reads the timestamps the submissions keep: wait = started_at (the claim)
minus created_at (the submit).

The bound: with A accounts with work queued and each run taking at most T seconds (T here is
the longest claim-to-next-claim interval while the runner had work waiting, which holds the
run, storing its result and taking the next task), a submission whose account has no earlier
row waiting is claimed after at most the run in progress and one turn of each of the other A - 1
accounts (round-robin by least recently served: an account served after it last was is behind
it), so it waits at most A x T. Each earlier row of its own still waiting (k of them) costs at
most one more such round: (k + 1) x A x T. The table gives A x T, and how many of each
account's submissions waited within their own (k + 1) x A x T.

Beside the measured waits it prints what first in, first out (the broker's order, the rule
before issue 63) would have made of the same arrivals: replayed, not run, with each run taking
the time it took here plus the median gap between a finish and the next claim.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KERNEL = REPO / "tests" / "kernels" / "relu_slow.py"
PROBLEM = "level1/901_Small_ReLU"
LIGHT_ACCOUNTS = 3
HEAVY_FACTOR = 10


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="how long accounts submit")
    parser.add_argument("--sleep", type=float, default=2.0,
                        help="seconds each test run sleeps while its model is built")
    parser.add_argument("--light-every", type=float,
                        help="seconds between a light account's submissions (default 8 x T0);"
                        " the heavy account submits ten times as often")
    parser.add_argument("--drain", type=float, default=900.0,
                        help="at most this many seconds to wait for the runs after submitting")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary folder (database, runner log)")
    return parser.parse_args()


def setup_django(folder: Path) -> None:
    """This process and the runner it starts use the bench's folder, and only it."""
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "kbsite.settings",
        "SQLITE_PATH": str(folder / "bench.sqlite3"),
        "KBSITE_VAR_DIR": str(folder / "var"),
        "BUILD_CACHE_DIR": str(folder / "build-cache"),
        "SECRET_KEY": secrets.token_urlsafe(50),  # the runner reads the same (signed tasks)
        "PYTHONUNBUFFERED": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        # The load is the point: no quota may refuse the heavy account's submissions.
        "QUOTA_GPU_SECONDS_PER_DAY": "0",
        "QUOTA_MAX_QUEUED": "0",
        # Only the bench's runs on the runner: no start-up self-test, no validations asked
        # for, no re-verifications (test runs never rank anyway).
        "RUNNER_SELF_TEST": "0",
        "RUNNER_VALIDATE_MISSING": "0",
        "REVERIFY_NEW_RECORDS": "0",
        "RUNNER_HEARTBEAT_SECONDS": "1",
    })
    # A runner on a host without delegated cgroups serves only when allowed to (it says so in
    # its log); what is measured here is the queue's order, not an evaluation's isolation.
    os.environ.setdefault("RUNNER_REQUIRE_CGROUPS", "0")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    logging.getLogger("django-q").setLevel(logging.WARNING)  # no line per queued task

    call_command("migrate", verbosity=0)


def start_runner(log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "manage.py", "runner", "--hardware", "cpu"],
            cwd=REPO, env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: the cluster and judges end with it
        )


def stop_runner(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=40)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@dataclass
class Account:
    name: str
    every: float  # seconds between its submissions
    offset: float  # its first submission, seconds after the start
    user: object = None
    submitted: list[tuple[int, int]] = field(default_factory=list)  # (pk, own rows waiting)

    def due(self, n: int) -> float:
        return self.offset + n * self.every


class Submitter:
    def __init__(self, *, sleep: float):
        from evaluation.models import Hardware
        from problems.models import Problem

        self.problem = Problem.objects.get(slug=PROBLEM)
        self.hardware = Hardware.objects.get(slug="cpu")
        self.source = KERNEL.read_text().replace("__SLEEP_SECONDS__", repr(sleep))
        self.count = 0

    def submit(self, user):
        from submissions.services import submission_create

        self.count += 1
        return submission_create(
            user=user, problem=self.problem, source=self.source + f"\n# {self.count}\n",
            backend="torch", hardware=self.hardware, test_run=True, timed=False,
        )


def wait_until(predicate, *, runner: subprocess.Popen, timeout: float, what: str,
               interval: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if runner.poll() is not None:
            raise SystemExit(f"the runner ended (exit status {runner.returncode}) while waiting "
                             f"for {what}: see its log")
        time.sleep(interval)
    raise SystemExit(f"gave up waiting for {what} after {timeout:.0f} s")


def seconds(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds()


def fifo_replay(rows: list, gap: float) -> dict[int, float]:
    """Each row's wait had one server taken them first in, first out, each run taking what it
    took here plus `gap`."""
    waits = {}
    free = None
    for row in sorted(rows, key=lambda r: (r.created_at, r.pk)):
        start = row.created_at if free is None or free < row.created_at else free
        waits[row.pk] = seconds(row.created_at, start)
        free = start + timedelta(seconds=seconds(row.started_at, row.finished_at) + gap)
    return waits


def main() -> None:
    args = parse_args()
    folder = Path(tempfile.mkdtemp(prefix="kbsite-fair-"))
    setup_django(folder)

    from django.contrib.auth import get_user_model

    from evaluation.services import hardware_register
    from gpu_runner.detect import detect
    from problems.services import samples_load
    from submissions.models import Submission

    samples_load()
    detected = detect("cpu")
    detected.pop("slug")
    hardware_register(slug="cpu", **detected)
    users = get_user_model().objects
    runner = start_runner(folder / "runner.log")
    try:
        submitter = Submitter(sleep=args.sleep)
        done = Submission.Status.FINISHED

        # Warm-up: two runs one after the other (the first pays the runner's cold start).
        warm = users.create_user("warmup", password=secrets.token_urlsafe(16))
        t0 = []
        for _ in range(2):
            pk = submitter.submit(warm).pk
            wait_until(lambda pk=pk: Submission.objects.filter(pk=pk, status=done).exists(),
                       runner=runner, timeout=300, what="a warm-up run")
            row = Submission.objects.get(pk=pk)
            t0.append(seconds(row.started_at, row.finished_at))
        light_every = args.light_every or round(8 * t0[-1], 1)
        heavy_every = light_every / HEAVY_FACTOR
        print(f"warm-up runs: {t0[0]:.1f} s (cold), {t0[1]:.1f} s: T0 = {t0[1]:.1f} s; "
              f"light accounts every {light_every:.1f} s, heavy every {heavy_every:.2f} s, "
              f"for {args.minutes:g} min")

        accounts = [Account("heavy", heavy_every, 0.0)] + [
            Account(f"light-{i}", light_every, light_every * i / (LIGHT_ACCOUNTS + 1))
            for i in range(1, LIGHT_ACCOUNTS + 1)
        ]
        for account in accounts:
            account.user = users.create_user(account.name, password=secrets.token_urlsafe(16))

        # Submit on schedule: submission n of an account at offset + n x every.
        span = args.minutes * 60
        schedule = sorted(
            (account.due(n), index, n)
            for index, account in enumerate(accounts)
            for n in range(int((span - account.offset) // account.every) + 1)
            if account.due(n) < span
        )
        start = time.monotonic()
        late = 0.0
        for due, index, _ in schedule:
            pause = start + due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            late = max(late, -pause)
            account = accounts[index]
            waiting = Submission.objects.filter(user=account.user,
                                                status=Submission.Status.QUEUED).count()
            account.submitted.append((submitter.submit(account.user).pk, waiting))
        submitting = time.monotonic() - start
        backlog = Submission.objects.filter(status=Submission.Status.QUEUED).count()
        print(f"submitted {len(schedule)} in {submitting:.0f} s (at most {late:.2f} s behind "
              f"schedule); {backlog} still queued then")

        ids = [pk for account in accounts for pk, _ in account.submitted]
        drain_start = time.monotonic()
        wait_until(lambda: Submission.objects.filter(pk__in=ids, status=done).count() == len(ids),
                   runner=runner, timeout=args.drain, what="the last runs", interval=2.0)
        print(f"drained in {time.monotonic() - drain_start:.0f} s")
    except BaseException:
        print(f"stopped; the database and the runner's log are kept in {folder}")
        raise
    finally:
        stop_runner(runner)

    rows = {row.pk: row for row in Submission.objects.filter(pk__in=ids)}
    report(accounts, rows, light_every, heavy_every)
    if args.keep:
        print(f"kept: {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)


def report(accounts: list[Account], rows: dict, light_every: float, heavy_every: float) -> None:
    from submissions.models import Submission

    bad = [(pk, row.verdict, row.attempts) for pk, row in rows.items()
           if row.verdict != "correct" or row.attempts != 1]
    # Every claim on the runner (warm-up runs included, before the bench's), in order: T is the
    # longest interval from one claim to the next while the next row was already waiting.
    claims = sorted(Submission.objects.exclude(started_at=None), key=lambda r: r.started_at)
    busy = [(a, b) for a, b in zip(claims, claims[1:], strict=False)
            if b.created_at <= a.finished_at]
    slots = [seconds(a.started_at, b.started_at) for a, b in busy]
    gaps = [seconds(a.finished_at, b.started_at) for a, b in busy]
    runs = [seconds(r.started_at, r.finished_at) for r in rows.values()]
    t_max, t_median = max(slots), statistics.median(slots)
    active = len(accounts)
    bound = active * t_max
    capacity = 60 / t_median
    offered = 60 * (1 / heavy_every + LIGHT_ACCOUNTS / light_every)
    fifo = fifo_replay(list(rows.values()), statistics.median(gaps))

    print()
    print(f"runs: median {statistics.median(runs):.2f} s, max {max(runs):.2f} s; claim to next "
          f"claim while busy (T): median {t_median:.2f} s, max {t_max:.2f} s "
          f"({len(slots)} intervals); capacity {capacity:.1f} runs/min, offered "
          f"{offered:.1f}/min ({offered / capacity:.2f}x)")
    print(f"bound for a submission with no earlier row of its own waiting: A x T = {active} x "
          f"{t_max:.2f} = {bound:.1f} s; with k earlier rows waiting, (k + 1) x A x T")
    print()
    header = (f"{'account':<8} {'every':>7} {'per min':>7} {'sent':>4} {'max k':>5} "
              f"{'median wait':>11} {'max wait':>8} {'A x T':>6} {'within':>7} "
              f"{'FIFO median':>11} {'FIFO max':>8}")
    print(header)
    print("-" * len(header))
    for account in accounts:
        waits = [seconds(rows[pk].created_at, rows[pk].started_at) for pk, _ in account.submitted]
        within = sum(seconds(rows[pk].created_at, rows[pk].started_at) <= (k + 1) * bound
                     for pk, k in account.submitted)
        replayed = [fifo[pk] for pk, _ in account.submitted]
        print(f"{account.name:<8} {account.every:>6.1f}s {60 / account.every:>7.2f} "
              f"{len(waits):>4} {max(k for _, k in account.submitted):>5} "
              f"{statistics.median(waits):>10.1f}s {max(waits):>7.1f}s {bound:>5.1f}s "
              f"{within:>3}/{len(waits):<3} {statistics.median(replayed):>10.1f}s "
              f"{max(replayed):>7.1f}s")
    print()
    print("wait = started_at (claim) - created_at (submit); within: waits <= (k + 1) x A x T, k "
          "its own earlier rows still queued when it was submitted; FIFO: the same arrivals "
          "replayed first in, first out (not run)")
    if bad:
        print(f"NOT all correct and evaluated once: {bad}")
        sys.exit(1)


if __name__ == "__main__":
    main()
