"""Per-user quotas on top of the API throttles: throttles limit how fast requests come, quotas
limit how much work one person can put on the runners.

- QUOTA_MAX_QUEUED: submissions of one user waiting or running at once;
- QUOTA_GPU_SECONDS_PER_DAY: evaluation wall time one user's submissions took since midnight UTC,
  less the time they waited for device memory behind other evaluations (not theirs to pay),
  plus what is committed: each submission waiting or running is reserved at its problem's
  estimate on its hardware (evaluation_estimate) until it finishes and its own time counts. A
  request whose own estimate would pass the budget is refused with the figures.

Both are read from settings at call time (0 turns a quota off). Staff are exempt, and so are
submissions without a user (model runs, which admins start and pay for).
"""

import math
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import F, FloatField, Sum
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from submissions.models import Evaluation, NcuReport, Reverification, Submission

DEFAULT_MAX_QUEUED = 200
DEFAULT_GPU_SECONDS_PER_DAY = 3600
# A full queue frees up as evaluations finish; there is no exact time to give, so clients are
# told to come back after a short while.
QUEUED_RETRY_AFTER = 30


def max_queued() -> int:
    return int(getattr(settings, "QUOTA_MAX_QUEUED", DEFAULT_MAX_QUEUED))


def gpu_seconds_per_day() -> int:
    return int(getattr(settings, "QUOTA_GPU_SECONDS_PER_DAY", DEFAULT_GPU_SECONDS_PER_DAY))


def is_exempt(user) -> bool:
    return user is None or not user.is_authenticated or user.is_staff


def day_start(now: datetime | None = None) -> datetime:
    """Midnight UTC of today: the GPU-seconds quota is per UTC day."""
    now = now or timezone.now()
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def queued_count(user) -> int:
    return Submission.objects.filter(user=user, status__in=Submission.OPEN).count()


def gpu_seconds_used(user, *, since: datetime) -> float:
    """Evaluation wall time of the user's submissions finished since `since`.

    The runner records the wall time in phases["wall"], and a shared GPU's wait for memory in
    phases["admission_wait"], which is not charged; evaluations without the wall time (a
    submission stopped after killing its runners) count from started_at to finished_at, and a
    submission cancelled while running counts the seconds it ran (Submission.charged_seconds).
    """
    evaluations = Evaluation.objects.filter(
        submission__user=user,
        purpose=Evaluation.Purpose.SUBMISSION,
        finished_at__gte=since,
    )
    with_wall = evaluations.filter(phases__has_key="wall")
    total = with_wall.aggregate(
        seconds=Sum(Cast(KeyTextTransform("wall", "phases"), FloatField())
                    - Coalesce(Cast(KeyTextTransform("admission_wait", "phases"), FloatField()),
                               0.0))
    )["seconds"] or 0.0
    # Few rows lack the wall time, so these are summed here rather than in portable SQL.
    for started, finished in evaluations.exclude(phases__has_key="wall").filter(
        started_at__isnull=False, finished_at__gt=F("started_at")
    ).values_list("started_at", "finished_at"):
        total += (finished - started).total_seconds()
    # A submission cancelled while running stores no evaluation: the time it ran is on its row.
    total += Submission.objects.filter(
        user=user, status=Submission.Status.CANCELLED, finished_at__gte=since,
        charged_seconds__isnull=False,
    ).aggregate(seconds=Sum("charged_seconds"))["seconds"] or 0.0
    return max(float(total), 0.0)


@dataclass(frozen=True)
class QuotaUsage:
    exempt: bool
    queued: int
    max_queued: int  # 0: no limit
    gpu_seconds: float
    gpu_seconds_per_day: int  # 0: no limit
    resets_at: datetime
    gpu_seconds_reserved: float = 0.0  # by the submissions waiting or running

    @property
    def queued_left(self) -> int | None:
        return None if self.exempt or not self.max_queued else max(self.max_queued - self.queued, 0)

    @property
    def gpu_seconds_left(self) -> float | None:
        if self.exempt or not self.gpu_seconds_per_day:
            return None
        return max(self.gpu_seconds_per_day - self.gpu_seconds - self.gpu_seconds_reserved, 0.0)


def quota_usage(*, user, now: datetime | None = None) -> QuotaUsage:
    now = now or timezone.now()
    start = day_start(now)
    return QuotaUsage(
        exempt=is_exempt(user),
        queued=queued_count(user),
        max_queued=max_queued(),
        gpu_seconds=gpu_seconds_used(user, since=start),
        gpu_seconds_per_day=gpu_seconds_per_day(),
        resets_at=start + timedelta(days=1),
        gpu_seconds_reserved=reserved_seconds(committed(user)) if not is_exempt(user) else 0.0,
    )


class QuotaExceeded(Exception):
    def __init__(self, message: str, *, code: str, retry_after: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code  # quota_queued or quota_gpu_seconds
        self.retry_after = retry_after
        self.figures: dict | None = None  # the budget's figures, for quota_gpu_seconds


# How many of the latest evaluations of a problem on a hardware its estimate reads.
ESTIMATE_SAMPLE = 20
ESTIMATE_PERCENTILE = 0.9


@dataclass(frozen=True)
class Work:
    """One evaluation to reserve: its problem, hardware, and whether it is timed."""

    problem_id: int
    hardware_id: int
    timed: bool = True


def _charged(phases: dict) -> float | None:
    """What an evaluation is charged: its wall time less its wait for device memory."""
    try:
        return max(float(phases["wall"]) - float(phases.get("admission_wait") or 0.0), 0.0)
    except (KeyError, TypeError, ValueError):
        return None


def evaluation_estimate(work: Work) -> float:
    """What one evaluation of `work` is reserved at: the 90th percentile of the charged wall
    time of the latest ESTIMATE_SAMPLE evaluations of its problem on its hardware (timed or
    not, as it is), else the evaluation time limit."""
    phases = Evaluation.objects.filter(
        submission__problem_id=work.problem_id, hardware_id=work.hardware_id,
        submission__timed=work.timed, purpose=Evaluation.Purpose.SUBMISSION,
    ).order_by("-finished_at").values_list("phases", flat=True)[:ESTIMATE_SAMPLE]
    times = sorted(t for t in (_charged(p or {}) for p in phases) if t is not None)
    if not times:
        return float(settings.EVALUATION_TIME_LIMIT)
    return times[max(math.ceil(ESTIMATE_PERCENTILE * len(times)) - 1, 0)]


def committed(user) -> list[Work]:
    """The user's submissions waiting or running: each holds a reservation until it finishes
    (then its evaluation's own time is charged instead) or is cancelled (then the time it ran,
    if it ran)."""
    return [Work(*row) for row in Submission.objects.filter(
        user=user, status__in=Submission.OPEN
    ).values_list("problem_id", "hardware_id", "timed")]


def reserved_seconds(work: list[Work]) -> float:
    counts = Counter(work)
    return sum(evaluation_estimate(w) * n for w, n in counts.items())


def quota_check(*, user, work: list[Work] | None = None, adding: int | None = None,
                now: datetime | None = None) -> None:
    """Raise QuotaExceeded when `work` (the evaluations a request adds; `adding` of unknown
    problems counts for the queue limit alone) would go over one of the user's quotas.

    The daily budget counts what is committed, not only what finished: seconds used today,
    plus the reservation of every submission of the user waiting or running, plus this
    request's, each reserved at evaluation_estimate. Run it inside the transaction that stores
    the submissions, after locking the user's row, so that concurrent requests of one user
    cannot all pass the check at once.
    """
    if is_exempt(user):
        return
    work = list(work or [])
    adding = len(work) if adding is None else adding
    now = now or timezone.now()
    limit = max_queued()
    if limit:
        queued = queued_count(user)
        if queued + adding > limit:
            raise QuotaExceeded(
                f"You have {queued} submissions waiting or running; the limit is {limit} at once"
                + (f" and this request adds {adding}" if adding > 1 else "")
                + ". Submit more once some have finished.",
                code="quota_queued",
                retry_after=QUEUED_RETRY_AFTER,
            )
    budget = gpu_seconds_per_day()
    if budget:
        start = day_start(now)
        used = gpu_seconds_used(user, since=start)
        waiting = committed(user)
        reserved = reserved_seconds(waiting)
        needed = reserved_seconds(work)
        # One evaluation at a time always goes while budget is left, so a budget below one
        # evaluation's estimate still lets work through (it overshoots by that one at most).
        alone = not waiting and len(work) <= 1
        if used >= budget or (used + reserved + needed > budget and not alone):
            raise _over_budget(used=used, reserved=reserved, waiting=len(waiting),
                               needed=needed, budget=budget, start=start, now=now)


def _over_budget(*, used: float, reserved: float, waiting: int, needed: float, budget: int,
                 start: datetime, now: datetime) -> QuotaExceeded:
    """The refusal, with the figures: the budget, what is used and reserved, and when enough
    frees (the reservation as the waiting work finishes, else the day's reset)."""
    resets = start + timedelta(days=1)
    until_reset = max(int((resets - now).total_seconds()) + 1, 1)
    short = used + reserved + needed - budget  # reserved seconds that must finish first
    if used >= budget or not reserved:
        frees = f"the budget resets at {resets:%H:%M} UTC"
        retry_after, frees_at = until_reset, resets
    else:
        retry_after = min(max(math.ceil(min(short, reserved)), 1), until_reset)
        frees_at = now + timedelta(seconds=retry_after)
        frees = (f"enough of it frees as your waiting work finishes, in about {retry_after} s "
                 "of evaluation at the soonest")
    error = QuotaExceeded(
        f"Your submissions used {used:.0f} of your {budget} evaluation seconds today and "
        f"{reserved:.0f} more are reserved by the {waiting} waiting or running; this request "
        f"needs about {needed:.0f}, which would pass the budget: {frees}.",
        code="quota_gpu_seconds",
        retry_after=retry_after,
    )
    error.figures = {"budget": budget, "used": round(used, 1), "reserved": round(reserved, 1),
                     "waiting": waiting, "needed": round(needed, 1),
                     "frees_at": frees_at.isoformat(), "resets_at": resets.isoformat()}
    return error


DEFAULT_NCU_REPORTS_PER_DAY = 10


def ncu_reports_per_day() -> int:
    return int(getattr(settings, "QUOTA_NCU_REPORTS_PER_DAY", DEFAULT_NCU_REPORTS_PER_DAY))


def ncu_quota_check(*, user, now: datetime | None = None) -> None:
    """Raise QuotaExceeded when the user has asked for QUOTA_NCU_REPORTS_PER_DAY Nsight Compute
    reports since midnight UTC (each holds a GPU for seconds to minutes). Staff are exempt."""
    if is_exempt(user):
        return
    limit = ncu_reports_per_day()
    if not limit:
        return
    now = now or timezone.now()
    start = day_start(now)
    used = NcuReport.objects.filter(requested_by=user, created_at__gte=start).count()
    if used >= limit:
        raise QuotaExceeded(
            f"You have asked for {used} Nsight Compute reports today; the limit is {limit} a "
            "day (UTC).",
            code="quota_ncu_reports",
            retry_after=max(int((start + timedelta(days=1) - now).total_seconds()), 1),
        )


DEFAULT_REVERIFICATIONS_PER_DAY = 3


def reverifications_per_day() -> int:
    return int(getattr(settings, "QUOTA_REVERIFICATIONS_PER_DAY",
                       DEFAULT_REVERIFICATIONS_PER_DAY))


def reverifications_used(user, *, since: datetime) -> int:
    return Reverification.objects.filter(
        requested_by=user, reason=Reverification.Reason.OWNER, created_at__gte=since
    ).count()


def reverify_quota_check(*, user, now: datetime | None = None) -> None:
    """Raise QuotaExceeded when the user has asked for QUOTA_REVERIFICATIONS_PER_DAY
    re-verifications of their own submissions since midnight UTC. Staff are exempt."""
    if is_exempt(user):
        return
    limit = reverifications_per_day()
    if not limit:
        return
    now = now or timezone.now()
    start = day_start(now)
    used = reverifications_used(user, since=start)
    if used >= limit:
        raise QuotaExceeded(
            f"You have asked for {used} re-verifications today; the limit is {limit} a day "
            "(UTC).",
            code="quota_reverifications",
            retry_after=max(int((start + timedelta(days=1) - now).total_seconds()), 1),
        )
