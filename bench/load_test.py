"""Load test: N concurrent API clients submitting kernels and polling them for M minutes.

Against a running site, with one or more API tokens (clients take them in turn):

    .venv/bin/python bench/load_test.py --url http://127.0.0.1:8000 --token KEY [--token KEY2]

or against a fresh embedded setup that it starts itself (`manage.py run_embedded` in a temporary
var folder, with one user and token per client; DATABASE_URL / REDIS_URL in the environment
make that the scaled setup instead):

    .venv/bin/python bench/load_test.py --embedded --clients 4 --minutes 2

On the scaled setup the started site gets a PostgreSQL database of its own: one with a unique
name (kbsite_load_...) is created on the server of DATABASE_URL (its role needs CREATEDB, which
scripts/scaled_services.sh gives) and dropped at the end, so a run leaves no users or
submissions in the database that DATABASE_URL names. Redis is not separated: its queue for the
hardware (cpu) is shared, so do not run this while another runner, such as `make scaled`'s,
serves that queue on the same Redis.

Each client keeps up to --in-flight submissions of its own queued or running: it submits (with
an Idempotency-Key, retried with the same key after a network error or a 503, so a retry can
never store a second copy), polls GET /api/v1/submissions/ID/ until each finishes, and submits
again. After the last submission it waits (--drain) for the evaluations to finish, then checks
every user's submission list on the server. It talks only HTTP, so it runs unchanged against
any setup, and prints:

    accepted, rejected by reason, evaluated (by verdict), unfinished after the drain,
    lost (accepted, then missing on the server: must be 0),
    duplicated (on the server but never accepted by a client: must be 0),
    p50/p95 latency of the API calls (submit and poll separately).

The exit status is 1 when anything was lost or duplicated.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import requests

REPO = Path(__file__).resolve().parent.parent
DEFAULT_KERNEL = REPO / "tests" / "kernels" / "relu_correct.py"
SUBMIT_ATTEMPTS = 6


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="the site, e.g. http://127.0.0.1:8000")
    parser.add_argument("--token", action="append", default=[], help="an API token (repeatable)")
    parser.add_argument("--embedded", action="store_true",
                        help="start run_embedded on a free port in a temporary folder")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--minutes", type=float, default=2.0, help="how long clients submit")
    parser.add_argument("--in-flight", type=int, default=2,
                        help="submissions a client keeps queued or running at once")
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between polls")
    parser.add_argument("--drain", type=float, default=300.0,
                        help="seconds to wait for the last evaluations after submitting stops")
    parser.add_argument("--problem", default="1/901", help="LEVEL/NUMBER (default 1/901)")
    parser.add_argument("--hardware", default="cpu")
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--kernel", type=Path, default=DEFAULT_KERNEL, help="the file to submit")
    parser.add_argument("--timeout", type=float, default=60.0, help="per request, in seconds")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true",
                        help="keep the embedded setup's temporary folder (database, logs) and,"
                        " on the scaled setup, its PostgreSQL database")
    args = parser.parse_args()
    if not args.embedded and (not args.url or not args.token):
        parser.error("give --url and at least one --token, or --embedded")
    return args


# ---- the figures --------------------------------------------------------------------------------


@dataclass
class Figures:
    lock: threading.Lock = field(default_factory=threading.Lock)
    accepted: dict[int, str] = field(default_factory=dict)  # submission id -> token
    rejected: Counter = field(default_factory=Counter)  # reason -> count
    retried: Counter = field(default_factory=Counter)  # reason of a retried attempt -> count
    verdicts: Counter = field(default_factory=Counter)
    finished: set[int] = field(default_factory=set)
    missing: set[int] = field(default_factory=set)  # accepted, then 404
    latency: dict[str, list[float]] = field(default_factory=lambda: {"submit": [], "poll": []})

    def timed(self, kind: str, seconds: float) -> None:
        with self.lock:
            self.latency[kind].append(seconds)


def reason_of(response: requests.Response) -> str:
    try:
        code = response.json().get("code", "")
    except ValueError:
        code = ""
    return f"{response.status_code} {code}".strip()


def percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(share * 100) - 1]


# ---- one client ---------------------------------------------------------------------------------


class LoadClient(threading.Thread):
    def __init__(self, *, number: int, base: str, token: str, payload: dict, args,
                 figures: Figures, stop_submitting: threading.Event, deadline: list[float]):
        super().__init__(name=f"client-{number}", daemon=True)
        self.base = base.rstrip("/")
        self.token = token
        self.payload = payload
        self.args = args
        self.figures = figures
        self.stop_submitting = stop_submitting
        self.deadline = deadline  # [monotonic time], set when the drain starts
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"
        self.in_flight: set[int] = set()

    def run(self) -> None:
        while True:
            if self.stop_submitting.is_set():
                if not self.in_flight or time.monotonic() > self.deadline[0]:
                    return
            elif len(self.in_flight) < self.args.in_flight:
                self.submit_one()
                continue
            self.poll_all()
            time.sleep(self.args.poll)

    def submit_one(self) -> None:
        key = uuid.uuid4().hex  # one key for every retry of this submission
        for attempt in range(1, SUBMIT_ATTEMPTS + 1):
            started = time.monotonic()
            try:
                response = self.session.post(
                    f"{self.base}/api/v1/submissions/", json=self.payload,
                    headers={"Idempotency-Key": key}, timeout=self.args.timeout,
                )
            except requests.RequestException as error:
                reason = f"network {type(error).__name__}"
                wait = min(2.0 ** attempt, 30.0)
            else:
                self.figures.timed("submit", time.monotonic() - started)
                if response.status_code == 202:
                    with self.figures.lock:
                        self.figures.accepted[response.json()["id"]] = self.token
                    self.in_flight.add(response.json()["id"])
                    return
                reason = reason_of(response)
                if response.status_code not in (429, 502, 503, 504):
                    break  # a refusal that retrying will not change
                wait = float(response.headers.get("Retry-After") or 2.0 ** attempt)
                if response.status_code == 429 and reason.endswith("quota_gpu_seconds"):
                    break  # the daily quota: no point waiting in a load test
            if attempt < SUBMIT_ATTEMPTS and not self.stop_submitting.is_set():
                with self.figures.lock:
                    self.figures.retried[reason] += 1
                time.sleep(min(wait, 30.0))
                continue
            break
        with self.figures.lock:
            self.figures.rejected[reason] += 1
        time.sleep(1.0)  # a refused client backs off a little before trying again

    def poll_all(self) -> None:
        for pk in sorted(self.in_flight):
            started = time.monotonic()
            try:
                response = self.session.get(
                    f"{self.base}/api/v1/submissions/{pk}/", timeout=self.args.timeout
                )
            except requests.RequestException:
                continue  # polled again next round
            self.figures.timed("poll", time.monotonic() - started)
            if response.status_code == 404:
                with self.figures.lock:
                    self.figures.missing.add(pk)
                self.in_flight.discard(pk)
            elif response.status_code == 200 and response.json()["status"] == "finished":
                with self.figures.lock:
                    self.figures.finished.add(pk)
                    self.figures.verdicts[response.json()["verdict"]] += 1
                self.in_flight.discard(pk)


# ---- after the run: what the server holds -------------------------------------------------------


def server_submissions(base: str, token: str, since: datetime, timeout: float) -> set[int]:
    """Ids of the token's user's submissions made since `since` (the list is newest first)."""
    found: set[int] = set()
    url: str | None = f"{base.rstrip('/')}/api/v1/submissions/?limit=1000"
    headers = {"Authorization": f"Token {token}"}
    while url:
        for attempt in range(5):
            try:
                response = requests.get(url, headers=headers, timeout=timeout)
            except requests.RequestException:
                time.sleep(2.0 ** attempt)
                continue
            if response.status_code in (429, 503):
                time.sleep(float(response.headers.get("Retry-After") or 2.0))
                continue
            response.raise_for_status()
            break
        else:
            raise RuntimeError(f"could not list the submissions at {url}")
        body = response.json()
        for item in body["results"]:
            created = datetime.fromisoformat(item["created_at"].replace("Z", "+00:00"))
            if created < since:
                return found
            found.add(item["id"])
        url = body.get("next")
    return found


# ---- the embedded setup -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ThrowawayDatabase:
    """A PostgreSQL database of this run's own, on the server that `url` points at.

    Created and dropped through `url` itself (CREATE/DROP DATABASE run from any database), so
    nothing is written in the database it names.
    """

    def __init__(self, url: str) -> None:
        parts = urlparse(url)
        self.admin_url = url
        self.name = f"kbsite_load_{datetime.now(UTC):%Y%m%d_%H%M%S}_{uuid.uuid4().hex[:8]}"
        self.url = urlunparse(parts._replace(path=f"/{self.name}"))
        import psycopg

        try:
            self._execute("CREATE DATABASE {}")
        except psycopg.errors.InsufficientPrivilege as error:
            raise RuntimeError(
                f"the role in DATABASE_URL may not create a database for the load test ({error});"
                " give it CREATEDB (scripts/scaled_services.sh does)"
            ) from error

    def _execute(self, statement: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=30) as connection:
            connection.execute(sql.SQL(statement).format(sql.Identifier(self.name)))

    def drop(self) -> None:
        # FORCE (PostgreSQL 13+) ends the sessions of any process that outlived the site.
        self._execute("DROP DATABASE IF EXISTS {} WITH (FORCE)")

    def __str__(self) -> str:
        return self.name


class EmbeddedSite:
    """`manage.py run_embedded` in a temporary var folder: web server, cpu runner, workers.

    With DATABASE_URL set (the scaled setup) it runs on a throwaway PostgreSQL database on that
    server, dropped by stop().
    """

    def __init__(self, clients: int) -> None:
        self.clients = clients
        self.folder = tempfile.mkdtemp(prefix="kbsite-load-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "KBSITE_VAR_DIR": self.folder, "PORT": str(self.port),
                    "DJANGO_SETTINGS_MODULE": "kbsite.settings"}
        self.database: ThrowawayDatabase | None = None
        self.process: subprocess.Popen | None = None
        self.log = open(Path(self.folder) / "site.log", "w")  # noqa: SIM115 (lives with the site)
        try:
            if os.environ.get("DATABASE_URL"):
                self.database = ThrowawayDatabase(os.environ["DATABASE_URL"])
                self.env["DATABASE_URL"] = self.database.url
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "run_embedded"], cwd=REPO, env=self.env,
                stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        except BaseException:
            self.stop(keep=False)
            raise

    def wait_until_up(self, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"run_embedded exited; see {self.log.name}")
            try:
                if requests.get(f"{self.url}/api/v1/hardware/", timeout=5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(1.0)
        raise RuntimeError(f"the site did not come up in {timeout:.0f} s; see {self.log.name}")

    def tokens(self) -> list[str]:
        keys = []
        for number in range(self.clients):
            done = subprocess.run(
                [sys.executable, "manage.py", "create_token", f"load-{number}", "--create-user",
                 "--name", "load test"],
                cwd=REPO, env=self.env, capture_output=True, text=True, check=True,
            )
            keys.append(done.stdout.strip().splitlines()[-1])
        return keys

    def wait_for_runner(self, hardware: str, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = requests.get(f"{self.url}/api/v1/hardware/", timeout=10).json()
            if any(row["slug"] == hardware and row["online_runners"] for row in rows):
                return
            time.sleep(1.0)
        raise RuntimeError(f"no runner came online for {hardware}")

    def stop(self, *, keep: bool) -> None:
        if self.process is not None and self.process.poll() is None:
            # run_embedded stops its children itself (each once; they run in sessions of
            # their own). SIGTERM, not SIGINT: a shell's background job ignores SIGINT, and so
            # would everything started from it.
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.log.close()
        if keep:
            print(f"the embedded setup's database and log are in {self.folder}"
                  + (f"; its PostgreSQL database is {self.database}" if self.database else ""))
            return
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.database is not None:
            self.database.drop()


# ---- main ---------------------------------------------------------------------------------------


def report(figures: Figures, *, server_extra: set[int], unfinished: set[int], setup: str,
           args, wall: float) -> dict:
    def latency(kind: str) -> dict:
        values = figures.latency[kind]
        return {"n": len(values),
                "p50_ms": round(1000 * percentile(values, 0.50), 1) if values else None,
                "p95_ms": round(1000 * percentile(values, 0.95), 1) if values else None}

    every = figures.latency["submit"] + figures.latency["poll"]
    return {
        "setup": setup,
        "clients": args.clients,
        "minutes": args.minutes,
        "in_flight_per_client": args.in_flight,
        "wall_seconds": round(wall, 1),
        "accepted": len(figures.accepted),
        "rejected": dict(figures.rejected),
        "retried_then_settled": dict(figures.retried),
        "evaluated": len(figures.finished),
        "verdicts": dict(figures.verdicts),
        "unfinished_after_drain": len(unfinished),
        "lost": len(figures.missing),
        "duplicated": len(server_extra),
        "latency_all": {"n": len(every),
                        "p50_ms": round(1000 * percentile(every, 0.5), 1) if every else None,
                        "p95_ms": round(1000 * percentile(every, 0.95), 1) if every else None},
        "latency_submit": latency("submit"),
        "latency_poll": latency("poll"),
    }


def main() -> int:
    args = parse_args()
    level, number = (int(part) for part in args.problem.split("/"))
    payload = {"level": level, "number": number, "backend": args.backend,
               "hardware": args.hardware, "source": args.kernel.read_text(),
               "filename": args.kernel.name}
    # A SIGTERM ends the run through the finally below, which stops the site it started and
    # drops its database, as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    site = None
    try:
        if args.embedded:
            site = EmbeddedSite(args.clients)
            where = f" on database {site.database}" if site.database else ""
            print(f"starting the embedded setup in {site.folder}{where} on port {site.port} ...",
                  flush=True)
            site.wait_until_up()
            tokens = site.tokens()
            site.wait_for_runner(args.hardware)
            base = site.url
            setup = (f"scaled (REDIS_URL, PostgreSQL database {site.database} of its own)"
                     if site.database else "embedded")
        else:
            base, tokens, setup = args.url, args.token, f"site at {args.url}"
        figures = Figures()
        stop_submitting = threading.Event()
        deadline = [float("inf")]
        since = datetime.now(UTC)
        clients = [
            LoadClient(number=i, base=base, token=tokens[i % len(tokens)], payload=payload,
                       args=args, figures=figures, stop_submitting=stop_submitting,
                       deadline=deadline)
            for i in range(args.clients)
        ]
        started = time.monotonic()
        print(f"{args.clients} clients submitting for {args.minutes:g} min against {base}",
              flush=True)
        for client in clients:
            client.start()
        time.sleep(args.minutes * 60)
        deadline[0] = time.monotonic() + args.drain
        stop_submitting.set()
        print(f"submitting stopped; waiting up to {args.drain:.0f} s for the evaluations",
              flush=True)
        for client in clients:
            client.join(args.drain + 2 * args.timeout)
        wall = time.monotonic() - started
        on_server: set[int] = set()
        for token in set(tokens):
            on_server |= server_submissions(base, token, since, args.timeout)
        accepted = set(figures.accepted)
        unfinished = accepted - figures.finished - figures.missing
        figures.missing |= accepted - on_server  # accepted, yet not in its owner's list
        results = report(figures, server_extra=on_server - accepted, unfinished=unfinished,
                         setup=setup, args=args, wall=wall)
    finally:
        if site is not None:
            site.stop(keep=args.keep)
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 1 if results["lost"] or results["duplicated"] else 0


if __name__ == "__main__":
    sys.exit(main())
