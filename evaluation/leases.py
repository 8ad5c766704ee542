"""Leased work: the one lifecycle of everything a runner claims and runs.

Submissions (their evaluation), re-verifications and validations are each a row with a `status`
("queued", "running", then a finished state), a holder (the runner's name), `attempts`,
`started_at` and `lease_expires_at`. Every step is a conditional UPDATE, so two runners can
never both win, and a runner presumed dead cannot overwrite the one that took over:

    queued --claim--> running --finish--> finished
               ^          | extend (while it runs: only a dead runner's lease lapses)
               |          v
               +--requeue-- lease lapsed (its runner died)

A row claimed `max_attempts` times whose runners all died is stopped (`stop_if_poison`), not
offered to the next runner, so the queue behind it keeps moving.
"""

import logging
import threading
from collections.abc import Iterable
from contextlib import contextmanager
from datetime import timedelta

from django.db import connection, models
from django.utils import timezone

log = logging.getLogger(__name__)

QUEUED = "queued"
RUNNING = "running"


def holder_field(model: type[models.Model]) -> str:
    """The column naming the runner that holds the lease ("claimed_by" unless the model says)."""
    return getattr(model, "LEASE_HOLDER_FIELD", "claimed_by")


def claimable(now=None) -> models.Q:
    """Queued, or running on a lease that ran out (its runner died)."""
    now = now or timezone.now()
    return models.Q(status=QUEUED) | models.Q(status=RUNNING, lease_expires_at__lt=now)


def claim(row: models.Model, *, runner_name: str, lease_seconds: float, **also) -> bool:
    """Claimable -> running by `runner_name`; one runner wins. Refreshes `row` when it did."""
    model = type(row)
    now = timezone.now()
    won = model.objects.filter(claimable(now), pk=row.pk).update(
        status=RUNNING,
        attempts=models.F("attempts") + 1,
        started_at=now,
        lease_expires_at=now + timedelta(seconds=lease_seconds),
        **{holder_field(model): runner_name},
        **also,
    ) == 1
    if won:
        row.refresh_from_db()
    return won


def held_by(model: type[models.Model], runner_name: str) -> models.Q:
    return models.Q(status=RUNNING, **{holder_field(model): runner_name})


def extend(row: models.Model, *, runner_name: str, lease_seconds: float) -> bool:
    model = type(row)
    return bool(
        model.objects.filter(held_by(model, runner_name), pk=row.pk).update(
            lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds)
        )
    )


def finish(row: models.Model, *, runner_name: str, **fields) -> bool:
    """Running by `runner_name` -> `fields` (a finished status); False when the claim was lost
    (the runner was presumed dead and another took over: the other result stands)."""
    model = type(row)
    return bool(
        model.objects.filter(held_by(model, runner_name), pk=row.pk).update(
            lease_expires_at=None, **fields
        )
    )


def stop_if_poison(row: models.Model, *, max_attempts: int, **fields) -> bool:
    """A row whose earlier claims all died with their runner gets `fields` (a finished status
    saying so) instead of another claim. True when this call stopped it."""
    if row.attempts < max_attempts:
        return False
    stopped = type(row).objects.filter(claimable(), pk=row.pk).update(
        lease_expires_at=None, **fields
    )
    if stopped:
        row.refresh_from_db()
    return bool(stopped)


def requeue_abandoned(rows: models.QuerySet, **also) -> list[int]:
    """Running rows whose lease lapsed go back to queued; returns their ids, for the caller to
    enqueue again (the broker may redeliver the old task too: the claim lets one in)."""
    now = timezone.now()
    lapsed = models.Q(status=RUNNING, lease_expires_at__lt=now)
    requeued = []
    for pk in list(rows.filter(lapsed).values_list("pk", flat=True)):
        if rows.model.objects.filter(lapsed, pk=pk).update(
            status=QUEUED, **{holder_field(rows.model): ""}, **also
        ):
            requeued.append(pk)
    return requeued


@contextmanager
def kept(rows: Iterable[models.Model], *, runner_name: str, lease_seconds: float):
    """Extend the leases of `rows` while the block runs (the child that runs the work may take
    far longer than one lease), so only a dead runner's lease lapses."""
    rows = list(rows)
    stopped = threading.Event()

    def beat() -> None:
        while not stopped.wait(max(lease_seconds / 6, 0.5)):
            for row in rows:
                try:
                    extend(row, runner_name=runner_name, lease_seconds=lease_seconds)
                except Exception:  # a briefly locked database; the next beat tries again
                    log.exception("could not extend the lease of %s", row)
        connection.close()  # this thread's own connection

    keeper = threading.Thread(target=beat, daemon=True)
    keeper.start()
    try:
        yield
    finally:
        stopped.set()
        keeper.join(timeout=5)
