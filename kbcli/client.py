"""A small client of kbsite's REST API (requests) and submission websocket (websockets)."""

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import requests
from websockets.exceptions import WebSocketException
from websockets.sync.client import connect

API = "/api/v1"


class ApiError(Exception):
    def __init__(self, status: int, body: dict) -> None:
        self.status = status
        self.detail = str(body.get("detail") or body)
        self.code = body.get("code", "")
        self.allowed = body.get("allowed") or []
        self.errors = body.get("errors")
        super().__init__(self.detail)

    def describe(self) -> str:
        text = f"{self.detail} (HTTP {self.status})"
        if self.allowed:
            text += "\n  allowed: " + ", ".join(str(value) for value in self.allowed)
        if isinstance(self.errors, list):
            for item in self.errors:
                text += f"\n  item {item.get('index')}: {item.get('detail')}"
        elif isinstance(self.errors, dict):
            for field, problems in self.errors.items():
                text += f"\n  {field}: {problems}"
        return text


def settled(state: dict) -> bool:
    """Whether a submission's record or live event is its last: cancelled, or finished and its
    ranking not pending (a would-be record is evaluated again, a third time where two disagree,
    before it ranks or is held). The API says so as `settled`; events carry the ranking."""
    if "settled" in state:
        return bool(state["settled"])
    if state.get("status") == "cancelled":
        return True
    ranking = state.get("ranking") or {}
    return state.get("status") == "finished" and ranking.get("state") != "pending"


def succeeded(state: dict) -> bool:
    """Whether a settled submission is what a script waiting on it hoped for (kb's exit status
    0): correct and ranked (its ranking's state, even where a faster one of the same
    participant holds the place), or a correct test run, which is never ranked. A correct result
    held or kept off the board did not succeed: it has no place on the board."""
    if state.get("verdict") != "correct":
        return False
    if state.get("test_run"):
        return True
    return (state.get("ranking") or {}).get("state") == "ranked"


class Client:
    def __init__(self, url: str, token: str, *, timeout: float = 30, retries: int = 5) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"
        self.session.headers["Accept"] = "application/json"

    def request(self, method: str, path: str, **kwargs: Any) -> dict:
        """One API call; throttled (429) and unreachable calls are retried.

        POSTs are only retried with an Idempotency-Key, which makes a retry return the first
        submission instead of storing a second one.
        """
        url = path if path.startswith("http") else self.url + path
        retriable = method == "GET" or "Idempotency-Key" in kwargs.get("headers", {})
        for attempt in range(self.retries + 1):
            try:
                response = self.session.request(method, url, timeout=self.timeout, **kwargs)
            except requests.ConnectionError:
                if not retriable or attempt == self.retries:
                    raise
                time.sleep(min(2**attempt, 10))
                continue
            if response.status_code == 429 and attempt < self.retries:
                time.sleep(float(response.headers.get("Retry-After") or 1))
                continue
            try:
                body = response.json()
            except ValueError:
                body = {"detail": response.text[:500] or response.reason}
            if response.status_code >= 400:
                raise ApiError(response.status_code, body if isinstance(body, dict) else {})
            return body
        raise AssertionError("unreachable")

    @classmethod
    def with_password(
        cls, url: str, username: str, password: str, *, name: str = "kb"
    ) -> "Client":
        """Make an API token with a username and password (HTTP Basic, taken by the token
        endpoint only) and return a client that uses it."""
        # No retries: a 429 here is the login lockout (minutes), not a throttle to wait out.
        client = cls(url, "", retries=0)
        del client.session.headers["Authorization"]
        client.session.auth = (username, password)
        created = client.request("POST", f"{API}/tokens/", json={"name": name})
        return cls(url, created["key"])

    def get(self, path: str, **params: Any) -> dict:
        return self.request("GET", path, params={k: v for k, v in params.items() if v})

    def problems(self, **filters: Any) -> list[dict]:
        return self.get(f"{API}/problems/", limit=1000, **filters)["results"]

    def problem(self, level: int, number: int) -> dict:
        return self.get(f"{API}/problems/{level}/{number}/")

    def hardware(self) -> list[dict]:
        return self.get(f"{API}/hardware/")

    def max_source_bytes(self) -> int | None:
        """The site's size limit on a kernel file, in bytes (GET /api/v1/quota/), so that kb
        names the site's own figure; None where the site does not say (an older one) or this
        token may not read it: the site's answer to the submission then decides."""
        try:
            limit = self.get(f"{API}/quota/").get("max_source_bytes")
        except ApiError:
            return None
        return limit if isinstance(limit, int) else None

    def submit(self, **fields: Any) -> dict:
        headers = {"Idempotency-Key": uuid.uuid4().hex}
        return self.request("POST", f"{API}/submissions/", json=fields, headers=headers)

    def submit_batch(self, items: list[dict]) -> list[dict]:
        """Store up to BATCH_MAX submissions at once (all or none); their accepted records,
        each with its batch's id as `batch` (a site from before batches had ids gives none)."""
        headers = {"Idempotency-Key": uuid.uuid4().hex}
        body = {"submissions": items}
        answer = self.request("POST", f"{API}/submissions/batch/", json=body, headers=headers)
        records = answer["submissions"]
        if answer.get("batch") is not None:
            for record in records:
                record.setdefault("batch", answer["batch"])
        return records

    def starter(self, slug: str, backend: str) -> dict:
        """A working kernel for the problem in the backend: problem, backend, filename, source."""
        return self.get(f"{API}/problems/{slug}/starter/", backend=backend)

    def submission(self, submission_id: int) -> dict:
        return self.get(f"{API}/submissions/{submission_id}/")

    def submissions(self, **filters: Any) -> list[dict]:
        return self.get(f"{API}/submissions/", **filters)["results"]

    def reverify(self, submission_id: int) -> dict:
        return self.request("POST", f"{API}/submissions/{submission_id}/reverify/")

    def cancel(self, submission_id: int) -> dict:
        """Cancel a queued or running submission of yours; its record, status cancelled."""
        return self.request("POST", f"{API}/submissions/{submission_id}/cancel/")

    def batch(self, batch_id: int) -> dict:
        return self.get(f"{API}/batches/{batch_id}/")

    def cancel_batch(self, batch_id: int) -> dict:
        """Cancel every queued or running submission of a batch of yours; the batch."""
        return self.request("POST", f"{API}/batches/{batch_id}/cancel/")

    def problem_by_slug(self, slug: str) -> dict:
        """The problem named by its slug (level1/19_ReLU), found through the list's search."""
        for problem in self.problems(q=slug):
            if problem["slug"] == slug:
                return problem
        raise ApiError(404, {"detail": f"There is no problem {slug!r}.", "code": "not_found"})

    def board(self, level: int, number: int, hardware: str, precision: str | None = None) -> dict:
        """A board: the problem's own precision's (its main board), or another precision's."""
        return self.get(f"{API}/leaderboard/boards/{level}/{number}/{hardware}/",
                        precision=precision)

    def competitions(self) -> list[dict]:
        return self.get(f"{API}/competitions/")["results"]

    def competition(self, slug: str) -> dict:
        return self.get(f"{API}/competitions/{slug}/")

    def enter(self, slug: str, **fields: Any) -> dict:
        return self.request("POST", f"{API}/competitions/{slug}/entries/", json=fields)

    def ncu_request(self, submission_id: int) -> dict:
        return self.request("POST", f"{API}/submissions/{submission_id}/ncu/")

    def ncu_reports(self, submission_id: int) -> list[dict]:
        return self.get(f"{API}/submissions/{submission_id}/ncu/")

    def ncu_report(self, submission_id: int, report_id: int) -> dict:
        return self.get(f"{API}/submissions/{submission_id}/ncu/{report_id}/")

    def follow(
        self, submission: dict, *, timeout: float, on_event: Callable[[dict], None]
    ) -> dict:
        """Call on_event with every status change until the submission is settled (finished,
        and its ranking no longer pending a re-verification); return its full record. The
        websocket first; polling when websockets do not get through."""
        deadline = time.monotonic() + timeout
        stream_url = submission.get("stream_url") or submission.get("urls", {}).get("stream_url")
        if stream_url:
            try:
                for event in self._websocket_events(stream_url, deadline):
                    on_event(event)
                    if settled(event):
                        state = self.submission(submission["id"])
                        if settled(state):
                            return state
            except (OSError, WebSocketException, TimeoutError):
                pass  # fall through to polling, which also resumes after a dropped socket
        while time.monotonic() < deadline:
            state = self.submission(submission["id"])
            on_event(state)
            if settled(state):
                return state
            time.sleep(1.0)
        raise TimeoutError(
            f"submission {submission['id']} was not settled within {timeout:.0f} s "
            "(`kb status ID --wait` goes on following it)"
        )

    def _websocket_events(self, stream_url: str, deadline: float) -> Iterator[dict]:
        origin = self.url  # the server only accepts websockets from its own origin
        with connect(
            stream_url,
            origin=origin,
            additional_headers={"Authorization": f"Token {self.token}"},
            open_timeout=10,
        ) as socket:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("gave up waiting for the verdict")
                yield json.loads(socket.recv(timeout=remaining))
