"""The table of leased work: every kind of row a runner claims, and how each is run, stopped
and enqueued (the lifecycle they share is evaluation/leases.py).

It lives here, above every leased model, because the kinds span the apps (validations are the
problems', the rest the submissions') and stopping one may refresh boards. Runners call `sweep` in
their heartbeat; `make run` calls `release` for a runner that died.
"""

import logging
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.tasks import async_task

from evaluation import leases
from evaluation.models import Hardware
from gpu_runner.services import reverification_stop, submission_stop
from problems.models import Validation
from submissions.models import NcuReport, Reverification, Submission
from submissions.queues import enqueue_evaluation, enqueue_ncu_report, enqueue_reverification

log = logging.getLogger(__name__)

# A queued submission whose task never reached the broker is queued again after this long (its
# own enqueue after the commit may still be trying).
UNQUEUED_GRACE_SECONDS = 60
# Rows of a kind a sweep hands the broker at most, so one heartbeat stays short.
STRANDED_PER_SWEEP = 100


def _submissions_without_a_task(rows: models.QuerySet, hardware: Hardware) -> Iterable[Submission]:
    """Queued submissions whose task never reached the broker (it was down at the commit), and,
    on Redis, those whose task went with a killed runner.

    Redis hands a task out once and forgets it, and a django-q2 cluster takes tasks ahead of its
    busy worker: a runner killed with such tasks in hand leaves their submissions queued with no
    task anywhere (the ORM broker hands unacknowledged tasks out again by itself). So when the
    queue is empty while submissions have waited longer than a lease, their tasks are enqueued
    again; a task that was not lost is then there twice, and the claim lets one in.
    """
    now = timezone.now()
    lost = models.Q(
        enqueued_at__isnull=True, created_at__lt=now - timedelta(seconds=UNQUEUED_GRACE_SECONDS)
    )
    if settings.REDIS_URL and not get_broker(hardware.queue_name).queue_size():
        lost |= models.Q(created_at__lt=now - timedelta(seconds=settings.RUNNER_LEASE_SECONDS))
    queued = rows.filter(lost, status=leases.QUEUED).select_related("hardware")
    return queued.order_by("created_at")[:STRANDED_PER_SWEEP]


def _without_a_task(rows: models.QuerySet, hardware: Hardware) -> Iterable[models.Model]:
    """Queued re-verifications or reports with no task: never enqueued (enqueued_at empty: the
    broker was down, the runner to avoid handed it back), or enqueued longer than a broker retry
    ago (lost with a killed runner on Redis; a duplicate is harmless, the claim lets one in)."""
    waited = timezone.now() - timedelta(seconds=settings.Q_RETRY)
    rows.filter(status=leases.QUEUED, enqueued_at__lt=waited).update(enqueued_at=None)
    queued = rows.filter(status=leases.QUEUED, enqueued_at__isnull=True)
    return queued.select_related("submission__hardware").order_by("created_at")[
        :STRANDED_PER_SWEEP
    ]


def _enqueue_validation(validation: Validation) -> bool:
    try:
        async_task(VALIDATION.task, validation.pk, cluster=validation.hardware.queue_name)
    except Exception:  # the broker is down: the task the validation had may still come
        log.exception("could not enqueue validation %s", validation.pk)
        return False
    return True


def _validation_stop(validation: Validation, *, message: str) -> bool:
    return leases.stop(
        validation,
        status=Validation.Status.FAILED,
        findings=[{"code": "runner_crash", "message": message}],
        finished_at=timezone.now(),
    )


def _ncu_report_stop(report: NcuReport, *, message: str) -> bool:
    return leases.stop(
        report, status=NcuReport.Status.FAILED, message=message, finished_at=timezone.now()
    )


SUBMISSION = leases.Kind(
    model=Submission,
    task="gpu_runner.tasks.evaluate",
    hardware="hardware",
    enqueue=enqueue_evaluation,
    crashed="The runner evaluating this submission died {attempts} times; it was stopped so the "
    "queue behind it keeps moving.",
    stop=submission_stop,  # finished, with a runner_crash evaluation saying so
    requeued={"progress": {"phase": "requeued"}},
    stranded=_submissions_without_a_task,
)
REVERIFICATION = leases.Kind(
    model=Reverification,
    task="gpu_runner.tasks.reverify",
    hardware="submission__hardware",
    enqueue=enqueue_reverification,
    crashed="The runner re-verifying this submission died {attempts} times; the "
    "re-verification was stopped.",
    stop=reverification_stop,  # failed, with a runner_crash evaluation; the boards follow
    requeued={"enqueued_at": None},
    stranded=_without_a_task,
)
VALIDATION = leases.Kind(
    model=Validation,
    task="gpu_runner.tasks.validate",
    hardware="hardware",
    enqueue=_enqueue_validation,
    crashed="The runner validating this reference died {attempts} times in a row (the "
    "reference probably crashes or exhausts the host); it was stopped.",
    stop=_validation_stop,  # failed, with the message as its finding
    requeued={"details": {"progress": "requeued"}},
)
NCU_REPORT = leases.Kind(
    model=NcuReport,
    task="gpu_runner.tasks.ncu_report",
    hardware="submission__hardware",
    enqueue=enqueue_ncu_report,
    crashed="The runner making this report died each time it tried.",
    stop=_ncu_report_stop,  # failed, with the message
    requeued={"enqueued_at": None},
    stranded=_without_a_task,
)
KINDS = (SUBMISSION, REVERIFICATION, VALIDATION, NCU_REPORT)


def sweep(*, hardware: Hardware) -> dict[str, int]:
    """Every kind's sweep for one hardware (leases.sweep); how many rows of each it enqueued."""
    return leases.sweep(KINDS, hardware=hardware)


def release(*, runner_name: str) -> int:
    """Every kind's leases held by a runner that died lapse now (leases.release)."""
    return leases.release(KINDS, runner_name=runner_name)
