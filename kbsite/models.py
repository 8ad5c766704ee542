from django.db import models
from django.utils import timezone


class LiveEvent(models.Model):
    """An event for a channel group, written by whichever process made it (a runner, the web).

    Every web process relays new rows to its own channel layer, so live updates cross from
    runner processes to browsers with no Redis; with Redis the event is also sent directly.
    The table doubles as a short history for clients that poll or reconnect.
    """

    group = models.CharField(max_length=200, db_index=True)
    payload = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.group}: {self.payload.get('type', '?')}"
