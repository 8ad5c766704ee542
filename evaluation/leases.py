"""Leased work: the one lifecycle of everything a runner claims and runs.

Submissions (their evaluation), re-verifications, validations and Nsight Compute reports are each
a row with a `status` ("queued", "running", then a finished state), a holder (the runner's name),
`attempts`, `started_at` and `lease_expires_at`. Every step is a conditional UPDATE, so two runners
can never both win, and a runner presumed dead cannot overwrite the one that took over:

    queued --claim--> running --finish--> finished
               ^          | extend (while it runs: only a dead runner's lease lapses)
               |          v
               +--requeue-- lease lapsed (its runner died)

A row claimed `SUBMISSION_MAX_ATTEMPTS` times whose runners all died is never claimed again: the
sweep stops it with a message saying so, and the queue behind it keeps moving.

What differs between the kinds (which task runs a row, how it is stopped and enqueued) is one
`Kind` each; the table of them is `gpu_runner/leased.py`, the one place above every leased model.
"""

import logging
import threading
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import connection, models
from django.utils import timezone

log = logging.getLogger(__name__)

QUEUED = "queued"
RUNNING = "running"


@dataclass(frozen=True)
class Kind:
    """One kind of leased work: what the sweep and the release need to know about it."""

    model: type[models.Model]
    task: str  # the django-q2 task that runs one row, by dotted name
    hardware: str  # the lookup from a row to the Hardware whose runners run it
    # Hands a queued row's task to its hardware's queue; False when the broker did not take it.
    enqueue: Callable[[models.Model], bool]
    # Why a row that killed its runners was stopped, with {attempts}.
    crashed: str
    # Stops such a row with that message (leases.stop: only while no live runner holds it), and
    # writes what else a stop writes; True when it did.
    stop: Callable[..., bool]
    # What a row whose runner died gets back in the queue, beside its status and holder.
    requeued: dict = field(default_factory=dict)
    # The queued rows of a hardware whose task no broker holds (it never reached one, or went
    # with a killed runner), for the sweep to enqueue again.
    stranded: Callable[[models.QuerySet, models.Model], Iterable[models.Model]] | None = None

    @property
    def name(self) -> str:
        return str(self.model._meta.verbose_name_plural)

    def rows_on(self, hardware: models.Model) -> models.QuerySet:
        """Its rows that runners of `hardware` run."""
        return self.model.objects.filter(**{self.hardware: hardware})


def holder_field(model: type[models.Model]) -> str:
    """The column naming the runner that holds the lease ("claimed_by" unless the model says)."""
    return getattr(model, "LEASE_HOLDER_FIELD", "claimed_by")


def claimable(now=None) -> models.Q:
    """Queued, or running on a lease that ran out (its runner died)."""
    return models.Q(status=QUEUED) | lapsed(now)


def lapsed(now=None) -> models.Q:
    """Running on a lease that ran out: its runner died."""
    return models.Q(status=RUNNING, lease_expires_at__lt=now or timezone.now())


def claim(row: models.Model, *, runner_name: str, lease_seconds: float, **also) -> bool:
    """Claimable -> running by `runner_name`; one runner wins. Refreshes `row` when it did.

    A row that killed `SUBMISSION_MAX_ATTEMPTS` runners is refused: the sweep stops it instead
    (stop_if_poison), so a kernel that takes its host down is not run again."""
    model = type(row)
    now = timezone.now()
    won = model.objects.filter(
        claimable(now), pk=row.pk, attempts__lt=settings.SUBMISSION_MAX_ATTEMPTS
    ).update(
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


def stop(row: models.Model, **fields) -> bool:
    """Claimable (no live runner holds it) -> `fields` (a finished status saying why). True when
    this call stopped it; refreshes `row` then."""
    stopped = type(row).objects.filter(claimable(), pk=row.pk).update(
        lease_expires_at=None, **fields
    )
    if stopped:
        row.refresh_from_db()
    return bool(stopped)


def stop_if_poison(kind: Kind, row: models.Model) -> bool:
    """A row whose `SUBMISSION_MAX_ATTEMPTS` claims all died with their runner is stopped with
    the kind's message instead of being offered to the next runner. True when this call did."""
    if row.attempts < settings.SUBMISSION_MAX_ATTEMPTS:
        return False
    stopped = kind.stop(row, message=kind.crashed.format(attempts=row.attempts))
    if stopped:
        log.warning("%s %s killed its runners %s times: stopped", kind.name, row.pk, row.attempts)
    return stopped


def requeue_abandoned(rows: models.QuerySet, **also) -> list[int]:
    """Running rows whose lease lapsed go back to queued; returns their ids, for the caller to
    enqueue again (the broker may redeliver the old task too: the claim lets one in)."""
    requeued = []
    for pk in list(rows.filter(lapsed()).values_list("pk", flat=True)):
        if rows.model.objects.filter(lapsed(), pk=pk).update(
            status=QUEUED, **{holder_field(rows.model): ""}, **also
        ):
            requeued.append(pk)
    return requeued


def sweep(kinds: Iterable[Kind], *, hardware: models.Model) -> dict[str, int]:
    """What every runner of `hardware` does in its heartbeat, for each kind: stop the rows that
    killed their runners too often, put back in the queue those whose runner died (its lease
    lapsed), and hand the broker the queued ones it holds no task for. Returns how many rows of
    each kind it enqueued."""
    enqueued = {}
    for kind in kinds:
        rows = kind.rows_on(hardware)
        poisoned = rows.filter(claimable(), attempts__gte=settings.SUBMISSION_MAX_ATTEMPTS)
        for row in poisoned:
            stop_if_poison(kind, row)
        requeued = requeue_abandoned(rows, **kind.requeued)
        count = sum(1 for row in rows.filter(pk__in=requeued) if kind.enqueue(row))
        for row in kind.stranded(rows, hardware) if kind.stranded else ():
            if not kind.enqueue(row):
                break  # the broker is down: the next sweep tries again
            count += 1
        enqueued[kind.name] = count
    return enqueued


def release(kinds: Iterable[Kind], *, runner_name: str) -> int:
    """Let the leases a dead runner held lapse now, rather than when they run out, for the next
    sweep to put its work back in the queue. Its device workers (`runner_name:dev0`...) count as
    it. Returns how many rows it held."""
    now = timezone.now()
    released = 0
    for kind in kinds:
        holder = holder_field(kind.model)
        held = models.Q(**{holder: runner_name}) | models.Q(
            **{f"{holder}__startswith": f"{runner_name}:"}
        )
        released += kind.model.objects.filter(held, status=RUNNING).update(lease_expires_at=now)
    return released


@contextmanager
def kept(rows: Iterable[models.Model], *, runner_name: str, lease_seconds: float,
         on_lost: Callable[[models.Model], None] | None = None):
    """Extend the leases of `rows` while the block runs (the child that runs the work may take
    far longer than one lease), so only a dead runner's lease lapses.

    `on_lost(row)` is called, from the beating thread, at each beat that finds the row no longer
    held by this runner (cancelled, or taken over after this runner was presumed dead): the
    caller decides whether to stop the work. Every beat, not the first alone, since the work may
    start processes after one (an evaluation waiting for the device, then started)."""
    rows = list(rows)
    stopped = threading.Event()

    def beat() -> None:
        while not stopped.wait(max(lease_seconds / 6, 0.5)):
            for row in rows:
                try:
                    held = extend(row, runner_name=runner_name, lease_seconds=lease_seconds)
                    if not held and on_lost is not None and not stopped.is_set():
                        on_lost(row)
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
