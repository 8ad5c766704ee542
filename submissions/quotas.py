"""Per-user quotas on top of the API throttles: throttles limit how fast requests come, quotas
limit how much work one person can put on the runners.

- QUOTA_MAX_QUEUED: submissions of one user waiting or running at once;
- QUOTA_GPU_SECONDS_PER_DAY: evaluation wall time one user's submissions took since midnight UTC,
  less the time they waited for device memory behind other evaluations (not theirs to pay).

Both are read from settings at call time (0 turns a quota off). Staff are exempt, and so are
submissions without a user (model runs, which admins start and pay for).
"""

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
    return Submission.objects.filter(
        user=user, status__in=[Submission.Status.QUEUED, Submission.Status.RUNNING]
    ).count()


def gpu_seconds_used(user, *, since: datetime) -> float:
    """Evaluation wall time of the user's submissions finished since `since`.

    The runner records the wall time in phases["wall"], and a shared GPU's wait for memory in
    phases["admission_wait"], which is not charged; evaluations without the wall time (a
    submission stopped after killing its runners) count from started_at to finished_at.
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
    return max(float(total), 0.0)


@dataclass(frozen=True)
class QuotaUsage:
    exempt: bool
    queued: int
    max_queued: int  # 0: no limit
    gpu_seconds: float
    gpu_seconds_per_day: int  # 0: no limit
    resets_at: datetime

    @property
    def queued_left(self) -> int | None:
        return None if self.exempt or not self.max_queued else max(self.max_queued - self.queued, 0)

    @property
    def gpu_seconds_left(self) -> float | None:
        if self.exempt or not self.gpu_seconds_per_day:
            return None
        return max(self.gpu_seconds_per_day - self.gpu_seconds, 0.0)


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
    )


class QuotaExceeded(Exception):
    def __init__(self, message: str, *, code: str, retry_after: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code  # quota_queued or quota_gpu_seconds
        self.retry_after = retry_after


def quota_check(*, user, adding: int = 1, now: datetime | None = None) -> None:
    """Raise QuotaExceeded when `adding` more submissions would go over one of the user's quotas.

    Run it inside the transaction that stores the submissions, after locking the user's row, so
    that concurrent requests of one user cannot all pass the check at once.
    """
    if is_exempt(user):
        return
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
        if used >= budget:
            resets = start + timedelta(days=1)
            raise QuotaExceeded(
                f"Your submissions used {used:.0f} of your {budget} evaluation seconds today; "
                f"the quota resets at {resets:%H:%M} UTC.",
                code="quota_gpu_seconds",
                retry_after=max(int((resets - now).total_seconds()) + 1, 1),
            )


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
