"""Live updates: publish events after commit, relay them across processes to channel groups.

Path from a runner process to a browser:
  runner -> publish() -> LiveEvent row (after commit) [+ group_send when the layer is Redis]
  web process -> relay task polls LiveEvent -> group_send on its in-memory layer
  -> consumer in the same process -> websocket.
"""

import asyncio
import logging
from datetime import timedelta

from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from kbsite.models import LiveEvent

log = logging.getLogger(__name__)

EVENT_RETENTION = timedelta(hours=1)


def submission_group(submission_id: int) -> str:
    return f"submission-{submission_id}"


def board_group(problem_id: int, hardware_slug: str) -> str:
    return f"board-{problem_id}-{hardware_slug}"


def layer_is_shared() -> bool:
    """True when the channel layer itself crosses processes (Redis)."""
    backend = settings.CHANNEL_LAYERS["default"]["BACKEND"]
    return "InMemory" not in backend


def publish(group: str, payload: dict) -> None:
    """Publish `payload` to `group` once the current transaction commits."""
    transaction.on_commit(lambda: _publish_now(group, payload))


def _publish_now(group: str, payload: dict) -> None:
    LiveEvent.objects.create(group=group, payload=payload)
    if layer_is_shared():
        try:
            async_to_sync(get_channel_layer().group_send)(
                group, {"type": "live.event", "payload": payload}
            )
        except Exception:  # the event is stored; pollers and reconnects still see it
            log.exception("could not send live event to %s", group)


class Relay:
    """Tails LiveEvent in one web process and hands new rows to the local channel layer."""

    def __init__(self) -> None:
        self.task: asyncio.Task | None = None
        self.started = asyncio.Event()
        self.last_id = 0

    async def ensure_started(self) -> None:
        """Start relaying in this event loop, if not yet.

        Call it before taking a snapshot for a new subscriber: every event after the relay's
        starting point is delivered, and everything before it is in the snapshot.
        """
        if layer_is_shared():
            return  # events arrive through Redis directly
        loop = asyncio.get_running_loop()
        if self.task is not None and not self.task.done() and self.task.get_loop() is loop:
            await self.started.wait()
            return
        # A new event loop (a new server, a test) starts from the newest event.
        self.task = loop.create_task(self._run())
        self.started = asyncio.Event()
        await self.started.wait()

    async def _run(self) -> None:
        layer = get_channel_layer()
        self.last_id = await sync_to_async(_latest_event_id)()
        self.started.set()
        cleaned_at = timezone.now()
        while True:
            try:
                events = await sync_to_async(_events_after)(self.last_id)
                for event in events:
                    await layer.group_send(
                        event.group, {"type": "live.event", "payload": event.payload}
                    )
                    self.last_id = event.id
                if timezone.now() - cleaned_at > timedelta(minutes=5):
                    await sync_to_async(_delete_old_events)()
                    cleaned_at = timezone.now()
            except asyncio.CancelledError:
                raise
            except Exception:  # a locked or briefly missing database must not end the relay
                log.exception("live relay failed; retrying")
            await asyncio.sleep(settings.LIVE_RELAY_INTERVAL)


def _latest_event_id() -> int:
    latest = LiveEvent.objects.order_by("-id").values_list("id", flat=True).first()
    return latest or 0


def _events_after(last_id: int) -> list[LiveEvent]:
    return list(LiveEvent.objects.filter(id__gt=last_id).order_by("id")[:500])


def _delete_old_events() -> None:
    LiveEvent.objects.filter(created_at__lt=timezone.now() - EVENT_RETENTION).delete()


relay = Relay()
