"""GET /api/v1/submissions/ID/events/: server-sent status events that end when it is finished."""

import asyncio
import json
import os
import time

import pytest
import requests
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from kbsite.live import publish, submission_group
from kbsite.models import LiveEvent
from submissions.models import Submission
from submissions.selectors import submission_status_payload
from submissions.services import submission_create
from tests.conftest import kernel_source

pytestmark = pytest.mark.django_db(transaction=True)


def parse(chunks: list[bytes]) -> list[dict]:
    """The events of an SSE stream: [{"event": ..., "id": ..., "data": {...}}]."""
    events = []
    for block in b"".join(chunks).decode().split("\n\n"):
        lines = [line for line in block.splitlines() if not line.startswith(":")]
        fields = dict(line.split(": ", 1) for line in lines)
        if fields:
            events.append({**fields, "data": json.loads(fields["data"])})
    return events


async def read_stream(response, timeout: float = 30) -> list[bytes]:
    async def collect():
        return [chunk async for chunk in response.streaming_content]

    return await asyncio.wait_for(collect(), timeout)


@pytest.fixture
def submission(user, relu_problem, cpu_hardware) -> Submission:
    return submission_create(
        user=user, problem=relu_problem, source=kernel_source("relu_correct.py"),
        backend="torch", hardware=cpu_hardware,
    )


def change(submission: Submission, **fields) -> None:
    """What a runner does: update the row, then publish the new status."""
    Submission.objects.filter(pk=submission.pk).update(**fields)
    submission.refresh_from_db()
    publish(submission_group(submission.pk), {"type": "status",
                                              **submission_status_payload(submission)})


async def test_a_finished_submission_streams_one_snapshot_and_ends(submission):
    await sync_to_async(change)(submission, status="finished", verdict="correct")
    response = await AsyncClient().get(f"/api/v1/submissions/{submission.pk}/events/")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    events = parse(await read_stream(response))
    assert [(e["event"], e["data"]["status"]) for e in events] == [("snapshot", "finished")]
    assert events[0]["data"]["verdict"] == "correct"


async def test_it_streams_each_change_and_ends_when_finished(submission):
    response = await AsyncClient().get(f"/api/v1/submissions/{submission.pk}/events/")
    reader = asyncio.ensure_future(read_stream(response))
    await asyncio.sleep(0.5)
    assert not reader.done()  # still queued: the stream stays open
    await sync_to_async(change)(submission, status="running", progress={"phase": "build"})
    await sync_to_async(change)(submission, progress={"type": "trial", "k": 1, "n": 5})
    await sync_to_async(change)(submission, status="finished", verdict="incorrect")
    events = parse(await reader)
    assert [(e["event"], e["data"]["status"]) for e in events] == [
        ("snapshot", "queued"), ("status", "running"), ("status", "running"),
        ("status", "finished"),
    ]
    assert events[0]["data"]["queue_position"] == 1
    assert events[2]["data"]["progress"] == {"type": "trial", "k": 1, "n": 5}
    assert events[-1]["data"]["verdict"] == "incorrect"
    # Every event carries its id, for a reconnect with Last-Event-ID.
    assert all(e["id"].isdigit() for e in events)


async def test_a_reconnect_with_last_event_id_replays_what_it_missed(submission):
    await sync_to_async(change)(submission, status="running", progress={"phase": "build"})
    seen = await sync_to_async(
        lambda: LiveEvent.objects.filter(group=submission_group(submission.pk)).last().pk
    )()
    # The client saw `seen`, dropped, and this happened meanwhile:
    await sync_to_async(change)(submission, progress={"type": "trial", "k": 2, "n": 5})
    response = await AsyncClient().get(
        f"/api/v1/submissions/{submission.pk}/events/", headers={"Last-Event-ID": str(seen)}
    )
    reader = asyncio.ensure_future(read_stream(response))
    await asyncio.sleep(0.5)
    await sync_to_async(change)(submission, status="finished", verdict="correct")
    events = parse(await reader)
    assert [e["event"] for e in events] == ["snapshot", "status", "status"]
    assert events[1]["data"]["progress"] == {"type": "trial", "k": 2, "n": 5}
    assert events[2]["data"]["status"] == "finished"


async def test_an_unknown_submission_is_404(db):
    response = await AsyncClient().get("/api/v1/submissions/999/events/")
    assert response.status_code == 404
    assert json.loads(response.content)["code"] == "not_found"


async def test_a_bad_token_is_refused(submission):
    response = await AsyncClient().get(
        f"/api/v1/submissions/{submission.pk}/events/", headers={"Authorization": "Token nope"}
    )
    assert response.status_code == 401


@pytest.fixture
def pool_of_two(monkeypatch):
    """The web process's PostgreSQL pool cut to two connections (read when daphne starts)."""
    monkeypatch.setenv("DB_POOL_MAX_SIZE", "2")
    monkeypatch.setenv("DB_POOL_MIN_SIZE", "1")
    monkeypatch.setenv("DB_POOL_TIMEOUT", "3")


@pytest.mark.scaled
@pytest.mark.skipif(not os.environ.get("DATABASE_URL"),
                    reason="needs DATABASE_URL (make test-scaled starts it)")
def test_open_streams_do_not_keep_the_pools_connections_from_other_requests(
    submission, pool_of_two, live_site
):
    # Five streams on a pool of two: each held its connection for its whole life once, and
    # every other request then waited the pool's timeout and got a 503.
    """Slow: open event streams and other requests to a real server process (daphne) sharing its
    database pool."""
    url = f"{live_site}/api/v1/submissions/{submission.pk}/events/"
    streams = [requests.get(url, stream=True, timeout=30) for _ in range(5)]
    try:
        firsts = [next(s.iter_lines()) for s in streams]
        assert firsts == [b"event: snapshot"] * 5
        time.sleep(1.0)  # the streams poll meanwhile
        for _ in range(3):
            started = time.monotonic()
            page = requests.get(f"{live_site}/submissions/{submission.pk}/status.json",
                                timeout=30)
            assert page.status_code == 200, page.text
            assert time.monotonic() - started < 2.0
    finally:
        for stream in streams:
            stream.close()
