"""Fair share: which claimable row a runner takes next. The one rule, beside the lease table.

Round-robin by account, oldest first within an account. An account is whoever owns the work: a
submission's user, or the owner of the model run whose sample it is; a re-verification is its
submission's owner's and takes that owner's turn. Test runs count like any submission.

An account's *turns* are the times its rows were claimed on the hardware (`started_at`, kept by
every claim). The next row is the oldest waiting row of the account that is most *due*: the one
whose w-th latest turn is oldest, w being its weight (`AccountWeight`, 1 unless an operator set
it). With weight 1 that is plain round-robin (whoever was served least recently goes next, an
account never served first); an account of weight 2 takes two turns per round of the others,
and so on. Ties go to the account whose oldest waiting row is oldest, so a lone account's queue
is first in, first out.

The rule reads no state of its own: the turns are the rows' claim times, so it holds across
runners, restarts and both databases, and the queue position shown to a user (`position`) is
the same rule played forward. A claim (`claim_next`) picks the fair next row and takes it with
the lease's conditional update (leases.claim: queued -> running, one winner); a runner that
loses the race to another picks again, so no row is evaluated twice and every task that finds
work claims the fair next row, whichever row its message named. Which rows and whose they are
is the caller's (`Source`, one per leased model: submissions.queues.fair_sources): this module
imports no app above it.
"""

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models.functions import Coalesce
from django.utils import timezone

from evaluation import leases

# How far back an account's turns are read: an account not served for this long is as due as
# one never served (it keeps the query to recent rows).
TURNS_WINDOW = timedelta(days=1)


@dataclass(frozen=True)
class Source:
    """One leased model's rows on one hardware, and whose they are."""

    rows: models.QuerySet  # every row of the model on the hardware
    account: models.Expression | str  # the owning user's id (None: the site's own work)
    # Rows of this queryset a given runner may not take (a re-verification avoids the runner
    # that made the result it checks): (runner_name, row) -> bool.
    may_run: Callable[[str, models.Model], bool] | None = None


@dataclass(frozen=True, order=True)
class Waiting:
    """A claimable row, as the rule sees it."""

    created_at: datetime
    source: int  # index of its Source
    pk: int
    account: int | None


def account_expression(*paths: str) -> models.Expression:
    """The first non-empty of these user-id lookups: `Coalesce("user_id", "run__created_by_id")`."""
    return Coalesce(*paths) if len(paths) > 1 else models.F(paths[0])


def weights(accounts: Iterable[int | None]) -> dict[int | None, int]:
    """Each account's weight: 1 unless an operator gave it another (AccountWeight)."""
    from evaluation.models import AccountWeight

    ids = [a for a in accounts if a is not None]
    found = dict(AccountWeight.objects.filter(user_id__in=ids).values_list("user_id", "weight"))
    return {a: max(1, found.get(a, 1)) for a in accounts}


def waiting(sources: list[Source], *, now: datetime | None = None) -> list[Waiting]:
    """The claimable rows of every source, oldest first (rows that killed their runners too
    often are left to the sweep, which stops them)."""
    now = now or timezone.now()
    rows = []
    for index, source in enumerate(sources):
        claimable = source.rows.filter(
            leases.claimable(now), attempts__lt=settings.SUBMISSION_MAX_ATTEMPTS
        ).annotate(fair_account=source.account)
        rows += [Waiting(created, index, pk, account) for pk, created, account in
                 claimable.values_list("pk", "created_at", "fair_account")]
    return sorted(rows)


def turns(sources: list[Source], accounts: dict[int | None, int], *,
          now: datetime | None = None) -> dict[int | None, list[datetime]]:
    """Each account's latest claim times on the hardware, newest first, as many as its
    weight (the rule looks no further back)."""
    since = (now or timezone.now()) - TURNS_WINDOW
    result: dict[int | None, list[datetime]] = {a: [] for a in accounts}
    for source in sources:
        started = source.rows.filter(started_at__gte=since).annotate(fair_account=source.account)
        for account, weight in accounts.items():
            mine = started.filter(
                models.Q(fair_account__isnull=True) if account is None
                else models.Q(fair_account=account)
            )
            result[account] += list(
                mine.order_by("-started_at").values_list("started_at", flat=True)[:weight]
            )
    return {a: sorted(times, reverse=True)[:accounts[a]] for a, times in result.items()}


def fair_order(rows: list[Waiting], turns: dict[int | None, list[datetime]],
               weights: dict[int | None, int], *, now: datetime) -> Iterator[Waiting]:
    """The rows in the order the rule takes them: `rows` oldest first, `turns` each account's
    latest claims (newest first), `weights` each account's weight. Pure: claims and the queue
    position both read it."""
    queues: dict[int | None, list[Waiting]] = {}
    for row in rows:
        queues.setdefault(row.account, []).append(row)
    never = datetime.min.replace(tzinfo=now.tzinfo)
    recent = {a: list(turns.get(a, [])) for a in queues}

    def due(account) -> datetime:
        """The account's w-th latest turn: before it, it has had its w turns this round."""
        weight = weights.get(account, 1)
        times = recent[account]
        return times[weight - 1] if len(times) >= weight else never

    heap = [(due(a), q[0].created_at, q[0].source, q[0].pk, i, a)
            for i, (a, q) in enumerate(queues.items())]
    heapq.heapify(heap)
    tick = itertools.count(1)
    while heap:
        _, _, _, _, i, account = heapq.heappop(heap)
        queue = queues[account]
        yield queue.pop(0)
        if not queue:
            continue
        # Played forward: this turn is later than every real one.
        recent[account].insert(0, now + timedelta(microseconds=next(tick)))
        heapq.heappush(heap, (due(account), queue[0].created_at, queue[0].source, queue[0].pk,
                              i, account))


def ordered(sources: list[Source], *, now: datetime | None = None) -> Iterator[Waiting]:
    """The claimable rows of `sources` in the fair order, read from the database now."""
    now = now or timezone.now()
    rows = waiting(sources, now=now)
    accounts = weights({row.account for row in rows})
    return fair_order(rows, turns(sources, accounts, now=now), accounts, now=now)


def position(sources: list[Source], source: int, pk: int) -> int | None:
    """1 for the row the next claim takes; None when the row is not waiting."""
    for place, row in enumerate(ordered(sources), start=1):
        if (row.source, row.pk) == (source, pk):
            return place
    return None


def claim_next(
    sources: list[Source], *, runner_name: str,
    claim: Callable[[Source, Waiting], models.Model | None],
    refused: Callable[[Source, models.Model], None] | None = None,
) -> tuple[int, models.Model] | None:
    """Claim the fair next row this runner may run: (its source's index, the row), or None
    when there is none. `claim` takes one row with the lease's conditional update and returns
    it, or None when another runner won it; then the rule is read again (each loss means
    another runner took a row, so this ends). Rows this runner may not run are skipped and
    passed to `refused` (a re-verification left for another runner)."""
    skipped: set[tuple[int, int]] = set()
    while True:
        for row in ordered(sources):
            if (row.source, row.pk) in skipped:
                continue
            source = sources[row.source]
            if source.may_run is not None:
                instance = source.rows.filter(pk=row.pk).first()
                if instance is None:
                    break  # gone meanwhile: read the rule again
                if not source.may_run(runner_name, instance):
                    skipped.add((row.source, row.pk))
                    if refused:
                        refused(source, instance)
                    continue
            won = claim(source, row)
            if won is not None:
                return row.source, won
            skipped.add((row.source, row.pk))  # another's now, so the loop ends
            break  # another runner took it: read the rule again
        else:
            return None
