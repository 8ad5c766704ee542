from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from kbsite.live import relay, submission_group
from submissions.models import Submission
from submissions.selectors import (
    can_see_source,
    can_see_submission,
    submission_status_payload,
    with_details,
)


class SubmissionConsumer(AsyncJsonWebsocketConsumer):
    """Streams one submission's status: a snapshot on connect, then every change."""

    details = False  # may this viewer see the error text (set with the snapshot)

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
        # Events are built for every viewer, without details; the owner and staff get them.
        payload = message["payload"]
        if self.details:
            payload = await database_sync_to_async(with_details)(payload)
        await self.send_json(payload)

    def _snapshot(self) -> dict | None:
        submission = (
            Submission.objects.select_related("problem").filter(pk=self.submission_id).first()
        )
        if submission is None or not can_see_submission(submission, self.scope.get("user")):
            return None
        self.details = can_see_source(submission, self.scope.get("user"))
        payload = submission_status_payload(submission, details=self.details)
        return {"type": "snapshot", **payload}
