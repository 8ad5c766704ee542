"""Fair share: which claimable row a runner takes next. The one rule, beside the lease table.

Round-robin by lane, oldest first within a lane. A lane is an account's work, or a part of it.
An account is whoever owns the work: a submission's user, or the owner of the model run whose
sample it is; a re-verification is its submission's owner's and takes that owner's turn. Test
runs count like any submission. Some of an account's rows may form a lane of their own beside
its account's (`Lane`, given by the caller): an entrant's entries of a running competition that
an operator weighted (`Competition.queue_weight` above 1) are one lane, keyed (account,
competition), while the entrant's other rows stay in the account's lane; a re-verification of
such an entry is in the entry's lane. A row is in a competition's lane only while the
competition runs (its start <= now < its end): before and after, the same rows are their
account's, turns included, so an ended competition leaves nothing behind. A competition of
weight 1 makes no lane at all.

A lane's *turns* are the times its rows were claimed on the hardware (`started_at`, kept by
every claim). The next row is the oldest waiting row of the lane that is most *due*: the one
whose w-th latest turn is oldest, w being its weight. An account's own lane weighs its
`AccountWeight` (1 unless an operator set it); a competition's lane weighs the competition's
weight, or the account's where that is larger (entering never slows an account's work). With
weight 1 that is plain round-robin (whoever was served least recently goes next, a lane never
served first); a lane of weight 2 takes two turns per round of the others, and so on. So while
a weight-3 competition runs, an entrant with entries and other work waiting is served 3 + 1
turns per round of an ordinary account. Ties go to the lane whose oldest waiting row is
oldest, so a lone account's queue is first in, first out.

The rule reads no state of its own: the turns are the rows' claim times, so it holds across
runners, restarts and both databases, and the queue position shown to a user (`position`) is
the same rule played forward. A claim (`claim_next`) picks the fair next row and takes it with
the lease's conditional update (leases.claim: queued -> running, one winner); a runner that
loses the race to another picks again, so no row is evaluated twice and every task that finds
work claims the fair next row, whichever row its message named. Which rows, whose they are and
which lane is the caller's (`Source`, one per leased model: submissions.queues.fair_sources):
this module imports no app above it.
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


# A lane: (the owning account, the lane among that account's). The second is None for the
# account's own lane, else the key a `Lane` gave (a competition's id).
LaneKey = tuple[int | None, int | None]


@dataclass(frozen=True)
class Lane:
    """Which of its account's lanes a row is in at one time, as two ORM expressions over the
    source's rows: `key` names the lane among its account's (NULL: the account's own lane) and
    `weight` is that lane's weight (read where `key` is not NULL)."""

    key: models.Expression
    weight: models.Expression


@dataclass(frozen=True)
class Source:
    """One leased model's rows on one hardware, and whose they are."""

    rows: models.QuerySet  # every row of the model on the hardware
    account: models.Expression | str  # the owning user's id (None: the site's own work)
    # Rows of this queryset a given runner may not take (a re-verification avoids the runner
    # that made the result it checks): (runner_name, row) -> bool.
    may_run: Callable[[str, models.Model], bool] | None = None
    # The lane of each row at a time (a row's lane can end, as a competition does): now ->
    # Lane. None: every row is in its account's own lane.
    lane: Callable[[datetime], Lane] | None = None


@dataclass(frozen=True, order=True)
class Waiting:
    """A claimable row, as the rule sees it."""

    created_at: datetime
    source: int  # index of its Source
    pk: int
    account: int | None
    lane: int | None = None  # its lane among its account's (None: the account's own)
    lane_weight: int = 1  # that lane's weight, where `lane` is not None

    @property
    def key(self) -> LaneKey:
        return (self.account, self.lane)


def account_expression(*paths: str) -> models.Expression:
    """The first non-empty of these user-id lookups: `Coalesce("user_id", "run__created_by_id")`."""
    return Coalesce(*paths) if len(paths) > 1 else models.F(paths[0])


def with_lanes(source: Source, rows: models.QuerySet, now: datetime) -> models.QuerySet:
    """`rows` (of `source`) annotated with fair_account, fair_lane and fair_lane_weight."""
    rows = rows.annotate(fair_account=source.account)
    if source.lane is None:
        return rows.annotate(
            fair_lane=models.Value(None, output_field=models.IntegerField()),
            fair_lane_weight=models.Value(1, output_field=models.IntegerField()),
        )
    lane = source.lane(now)
    return rows.annotate(fair_lane=lane.key, fair_lane_weight=lane.weight)


def in_lane(key: LaneKey) -> models.Q:
    """The rows of one lane, in a queryset from `with_lanes`."""
    account, lane = key
    return (
        (models.Q(fair_account__isnull=True) if account is None
         else models.Q(fair_account=account))
        & (models.Q(fair_lane__isnull=True) if lane is None else models.Q(fair_lane=lane))
    )


def weights(rows: Iterable[Waiting]) -> dict[LaneKey, int]:
    """The weight of each of these rows' lanes: an account's own lane weighs its AccountWeight
    (1 unless an operator gave it another); a lane of its own (a running competition's entries)
    weighs what its rows say, or the account's weight where that is larger, so that entering
    a weighted competition never slows an account's work."""
    from evaluation.models import AccountWeight

    rows = list(rows)
    ids = {row.account for row in rows if row.account is not None}
    found = dict(AccountWeight.objects.filter(user_id__in=ids).values_list("user_id", "weight"))
    result: dict[LaneKey, int] = {}
    for row in rows:
        weight = max(1, found.get(row.account, 1))
        if row.lane is not None:
            weight = max(weight, row.lane_weight or 1)
        result[row.key] = weight
    return result


def waiting(sources: list[Source], *, now: datetime | None = None) -> list[Waiting]:
    """The claimable rows of every source, oldest first (rows that killed their runners too
    often are left to the sweep, which stops them)."""
    now = now or timezone.now()
    rows = []
    for index, source in enumerate(sources):
        claimable = with_lanes(source, source.rows.filter(
            leases.claimable(now), attempts__lt=settings.SUBMISSION_MAX_ATTEMPTS
        ), now)
        rows += [Waiting(created, index, pk, account, lane, lane_weight)
                 for pk, created, account, lane, lane_weight in claimable.values_list(
                     "pk", "created_at", "fair_account", "fair_lane", "fair_lane_weight")]
    return sorted(rows)


def turns(sources: list[Source], lanes: dict[LaneKey, int], *,
          now: datetime | None = None) -> dict[LaneKey, list[datetime]]:
    """Each lane's latest claim times on the hardware, newest first, as many as its weight
    (the rule looks no further back). A row's lane is the one it is in now: the turns of an
    ended competition's entries are their account's again."""
    now = now or timezone.now()
    since = now - TURNS_WINDOW
    result: dict[LaneKey, list[datetime]] = {key: [] for key in lanes}
    for source in sources:
        started = with_lanes(source, source.rows.filter(started_at__gte=since), now)
        for key, weight in lanes.items():
            result[key] += list(started.filter(in_lane(key)).order_by("-started_at")
                                .values_list("started_at", flat=True)[:weight])
    return {key: sorted(times, reverse=True)[:lanes[key]] for key, times in result.items()}


def fair_order(rows: list[Waiting], turns: dict[LaneKey, list[datetime]],
               weights: dict[LaneKey, int], *, now: datetime) -> Iterator[Waiting]:
    """The rows in the order the rule takes them: `rows` oldest first, `turns` each lane's
    latest claims (newest first), `weights` each lane's weight. Pure: claims and the queue
    position both read it."""
    queues: dict[LaneKey, list[Waiting]] = {}
    for row in rows:
        queues.setdefault(row.key, []).append(row)
    never = datetime.min.replace(tzinfo=now.tzinfo)
    recent = {key: list(turns.get(key, [])) for key in queues}

    def due(key: LaneKey) -> datetime:
        """The lane's w-th latest turn: before it, it has had its w turns this round."""
        weight = weights.get(key, 1)
        times = recent[key]
        return times[weight - 1] if len(times) >= weight else never

    heap = [(due(key), q[0].created_at, q[0].source, q[0].pk, i, key)
            for i, (key, q) in enumerate(queues.items())]
    heapq.heapify(heap)
    tick = itertools.count(1)
    while heap:
        _, _, _, _, i, key = heapq.heappop(heap)
        queue = queues[key]
        yield queue.pop(0)
        if not queue:
            continue
        # Played forward: this turn is later than every real one.
        recent[key].insert(0, now + timedelta(microseconds=next(tick)))
        heapq.heappush(heap, (due(key), queue[0].created_at, queue[0].source, queue[0].pk,
                              i, key))


def ordered(sources: list[Source], *, now: datetime | None = None) -> Iterator[Waiting]:
    """The claimable rows of `sources` in the fair order, read from the database now."""
    now = now or timezone.now()
    rows = waiting(sources, now=now)
    lanes = weights(rows)
    return fair_order(rows, turns(sources, lanes, now=now), lanes, now=now)


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
