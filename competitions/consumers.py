from channels.generic.websocket import AsyncJsonWebsocketConsumer

from competitions.services import standings_group
from kbsite.live import relay


class StandingsConsumer(AsyncJsonWebsocketConsumer):
    """Tells a competition's page that its standings changed (it fetches them again)."""

    async def connect(self) -> None:
        await relay.ensure_started()
        self.group = standings_group(self.scope["url_route"]["kwargs"]["competition_id"])
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json({"type": "hello"})

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def live_event(self, message: dict) -> None:
        await self.send_json(message["payload"])
