from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from kbsite.live import relay, submission_group
from submissions.models import Submission
from submissions.selectors import submission_status_payload


class SubmissionConsumer(AsyncJsonWebsocketConsumer):
    """Streams one submission's status: a snapshot on connect, then every change."""

    async def connect(self) -> None:
        self.submission_id = self.scope["url_route"]["kwargs"]["submission_id"]
        # Relay first, then join, then the snapshot: a change committed at any point between
        # is either in the snapshot or delivered as an event.
        await relay.ensure_started()
        self.group = submission_group(self.submission_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        snapshot = await database_sync_to_async(self._snapshot)()
        if snapshot is None:
            await self.close(code=4404)
            return
        await self.accept()
        await self.send_json(snapshot)

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def live_event(self, message: dict) -> None:
        await self.send_json(message["payload"])

    def _snapshot(self) -> dict | None:
        submission = Submission.objects.filter(pk=self.submission_id).first()
        if submission is None:
            return None
        return {"type": "snapshot", **submission_status_payload(submission)}
