from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from evaluation.models import Hardware
from kbsite.live import relay
from leaderboard.selectors import board_live_group, board_snapshot, with_html
from leaderboard.services import LEADERBOARD_GROUP
from problems.models import Problem


class BoardConsumer(AsyncJsonWebsocketConsumer):
    """Streams one board, a problem on one hardware in one precision (?precision=, the
    problem's own by default): the rows on connect, then each change."""

    async def connect(self) -> None:
        kwargs = self.scope["url_route"]["kwargs"]
        problem_id, hardware_slug = kwargs["problem_id"], kwargs["hardware"]
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        precision, own = await database_sync_to_async(self._precisions)(
            problem_id, (query.get("precision") or [""])[0]
        )
        if precision is None:
            await self.close(code=4404)
            return
        # Relay first, then join, then the snapshot: a change committed at any point between
        # is either in the snapshot or delivered as an event.
        await relay.ensure_started()
        self.group = board_live_group(problem_id, hardware_slug, precision, problem_precision=own)
        await self.channel_layer.group_add(self.group, self.channel_name)
        snapshot = await database_sync_to_async(self._snapshot)(
            problem_id, hardware_slug, self.scope.get("user"), precision
        )
        if snapshot is None:
            await self.close(code=4404)
            return
        await self.accept()
        await self.send_json(with_html(snapshot))

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def live_event(self, message: dict) -> None:
        await self.send_json(with_html(message["payload"]))

    @staticmethod
    def _precisions(problem_id: int, asked: str) -> tuple[str | None, str]:
        """The board's precision (the one asked for, else the problem's own; None for one that
        is not a precision) and the problem's own."""
        own = Problem.objects.filter(pk=problem_id).values_list("precision", flat=True).first()
        own = own or Problem.Precision.FP32  # no such problem: the snapshot says so
        if asked and asked not in Problem.Precision.values:
            return None, own
        return asked or own, own

    @staticmethod
    def _snapshot(
        problem_id: int, hardware_slug: str, user, precision: str | None = None
    ) -> dict | None:
        # A draft's or a held problem's board is not there for others than staff.
        problem = Problem.objects.visible_to(user).filter(pk=problem_id).first()
        hardware = Hardware.objects.filter(slug=hardware_slug).first()
        if problem is None or hardware is None:
            return None
        return board_snapshot(problem=problem, hardware=hardware, precision=precision)


class LeaderboardConsumer(AsyncJsonWebsocketConsumer):
    """Every result that lands, for the global, model and user pages (one shared group)."""

    async def connect(self) -> None:
        await relay.ensure_started()
        await self.channel_layer.group_add(LEADERBOARD_GROUP, self.channel_name)
        await self.accept()
        await self.send_json({"type": "hello"})

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(LEADERBOARD_GROUP, self.channel_name)

    async def live_event(self, message: dict) -> None:
        await self.send_json(with_html(message["payload"]))
