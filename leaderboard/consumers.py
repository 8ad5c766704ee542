from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from evaluation.models import Hardware
from kbsite.live import board_group, relay
from leaderboard.services import board_rows
from problems.models import Problem


class BoardConsumer(AsyncJsonWebsocketConsumer):
    """Streams a problem's board on one hardware: rows on connect, then each change."""

    async def connect(self) -> None:
        kwargs = self.scope["url_route"]["kwargs"]
        snapshot = await database_sync_to_async(self._snapshot)(
            kwargs["problem_id"], kwargs["hardware"]
        )
        if snapshot is None:
            await self.close(code=4404)
            return
        self.group = board_group(kwargs["problem_id"], kwargs["hardware"])
        await self.channel_layer.group_add(self.group, self.channel_name)
        relay.ensure_started()
        await self.accept()
        await self.send_json(snapshot)

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def live_event(self, message: dict) -> None:
        await self.send_json(message["payload"])

    def _snapshot(self, problem_id: int, hardware_slug: str) -> dict | None:
        problem = Problem.objects.filter(pk=problem_id).first()
        hardware = Hardware.objects.filter(slug=hardware_slug).first()
        if problem is None or hardware is None:
            return None
        return {
            "type": "board",
            "problem": problem.pk,
            "hardware": hardware.slug,
            "rows": board_rows(problem=problem, hardware=hardware),
        }
