"""A submission's live events: what is published to its group when its status changes
(submission_status_publish), and server-sent events for clients that cannot use websockets.

The event stream is an async view: it tails the LiveEvent rows of the submission's group
(written by whichever process changed the submission, the runner included), so it works across
processes in every setup, and ends once the submission is settled: finished, and its ranking
no longer pending a re-verification (Submission.is_settled; a would-be record is evaluated again
before it ranks).
"""

import asyncio
import functools
import json
import time
from collections.abc import AsyncIterator, Callable

from asgiref.sync import sync_to_async
from django.db import connection
from django.http import JsonResponse, StreamingHttpResponse
from django.views.decorators.http import require_GET
from rest_framework.exceptions import AuthenticationFailed

from accounts.authentication import token_from_header
from kbsite.live import publish, submission_group
from kbsite.models import LiveEvent
from submissions.models import Submission
from submissions.selectors import (
    RankingState,
    can_see_source,
    can_see_submission,
    submission_status_payload,
    with_details,
)

POLL_SECONDS = 0.25
# Also read the row itself this often, in case an event was pruned or never written.
CHECK_ROW_SECONDS = 5.0
KEEPALIVE_SECONDS = 15.0
# A stream ends after this long even if the evaluation has not; clients reconnect with
# Last-Event-ID and lose nothing.
MAX_STREAM_SECONDS = 3600.0


def submission_status_publish(*, submission: Submission) -> None:
    """Send the submission's status to its group (its page, the event stream, `kb`) once the
    current transaction commits: whoever changes a submission, the web process or a runner.

    Raises what the database raises: a caller after its own commit (an on_commit callback)
    registers it robust, as the row it reports on is what counts, not the event.
    """
    publish(
        submission_group(submission.pk), {"type": "status", **submission_status_payload(submission)}
    )


def settled(payload: dict) -> bool:
    """Whether a status payload (selectors.submission_status_payload) is the last one: finished,
    and its ranking not pending, or cancelled (Submission.is_settled, as the payload carries it)."""
    if payload.get("status") == Submission.Status.CANCELLED:
        return True
    ranking = payload.get("ranking") or {}
    return payload.get("status") == Submission.Status.FINISHED and ranking.get("state") != (
        RankingState.PENDING
    )


def _format(event: str, payload: dict, event_id: int | None = None) -> bytes:
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append("data: " + json.dumps(payload, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


def _gives_back_connection(query: Callable) -> Callable:
    """Return the thread's database connection to the pool after each query.

    A stream holds its request's thread for up to MAX_STREAM_SECONDS, and Django gives a
    request's connection back only when the response ends: with PostgreSQL's connection pool
    (kbsite/settings.py), every open stream would keep one of the pool's few connections.
    """

    @functools.wraps(query)
    def wrapper(*args, **kwargs):
        try:
            return query(*args, **kwargs)
        finally:
            if "pool" in connection.settings_dict.get("OPTIONS", {}) and not (
                connection.in_atomic_block
            ):
                connection.close()

    return wrapper


@_gives_back_connection
def _snapshot(pk: int, details: bool) -> dict | None:
    submission = Submission.objects.filter(pk=pk).first()
    if submission is None:
        return None
    return submission_status_payload(submission, details=details)


@_gives_back_connection
def _may_see_details(pk: int, user) -> bool:
    submission = Submission.objects.select_related("problem").filter(pk=pk).first()
    return submission is not None and can_see_source(submission, user)


@_gives_back_connection
def _is_there_for(pk: int, user) -> bool:
    submission = Submission.objects.select_related("problem").filter(pk=pk).first()
    return submission is not None and can_see_submission(submission, user)


_with_details = _gives_back_connection(with_details)


@_gives_back_connection
def _latest_event_id(group: str) -> int:
    return (
        LiveEvent.objects.filter(group=group).order_by("-id").values_list("id", flat=True).first()
        or 0
    )


@_gives_back_connection
def _events_after(group: str, last_id: int) -> list[tuple[int, dict]]:
    return list(
        LiveEvent.objects.filter(group=group, id__gt=last_id)
        .order_by("id")
        .values_list("id", "payload")[:200]
    )


async def _stream(pk: int, *, last_id: int | None, details: bool) -> AsyncIterator[bytes]:
    """Events are stored without details (every viewer reads them); the owner and staff get
    the error text added (selectors.can_see_source)."""
    group = submission_group(pk)
    if last_id is None:
        # Take the position first, then the snapshot: nothing can fall between the two.
        last_id = await sync_to_async(_latest_event_id)(group)
    snapshot = await sync_to_async(_snapshot)(pk, details)
    if snapshot is None:
        return
    yield _format("snapshot", {"type": "snapshot", **snapshot}, last_id)
    if settled(snapshot):
        return
    started = checked = sent = time.monotonic()
    while time.monotonic() - started < MAX_STREAM_SECONDS:
        await asyncio.sleep(POLL_SECONDS)
        for event_id, payload in await sync_to_async(_events_after)(group, last_id):
            last_id = event_id
            sent = time.monotonic()
            if details:
                payload = await sync_to_async(_with_details)(payload)
            yield _format(payload.get("type", "status"), payload, event_id)
            if settled(payload):
                return
        now = time.monotonic()
        if now - checked >= CHECK_ROW_SECONDS:
            checked = now
            snapshot = await sync_to_async(_snapshot)(pk, details)
            if snapshot is None or settled(snapshot):
                if snapshot is not None:
                    yield _format("status", {"type": "status", **snapshot}, last_id)
                return
        if now - sent >= KEEPALIVE_SECONDS:
            sent = now
            yield b": keep-alive\n\n"


def _authenticate(header: bytes) -> tuple[object | None, str | None]:
    """(the token's user or None, None) when the request may go on; else (None, why not)."""
    try:
        found = token_from_header(header)
    except AuthenticationFailed as error:
        return None, str(error.detail)
    return (found[0] if found else None), None


@require_GET
async def submission_events(request, pk: int):
    """`text/event-stream` of the submission's status: a snapshot, then every change."""
    # The status is public, as on the submission page and its websocket; a token that is
    # sent must still be valid.
    header = request.headers.get("Authorization", "").encode("latin-1", "replace")
    user, problem = await sync_to_async(_authenticate)(header)
    if problem:
        return JsonResponse({"detail": problem, "code": "authentication_failed"}, status=401)
    if user is None:
        user = await request.auser()
    if not await sync_to_async(_is_there_for)(pk, user):
        return JsonResponse(
            {"detail": f"There is no submission {pk}.", "code": "not_found"}, status=404
        )
    details = await sync_to_async(_may_see_details)(pk, user)
    last_event = request.headers.get("Last-Event-ID", "")
    response = StreamingHttpResponse(
        _stream(pk, last_id=int(last_event) if last_event.isdigit() else None, details=details),
        content_type="text/event-stream",
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # proxies must not hold the stream back
    return response
