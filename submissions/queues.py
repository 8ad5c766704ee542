"""Handing work to a hardware's django-q2 queue: a submission's evaluation, a re-verification,
an Nsight Compute report. Called after the row is committed, and by the runners' sweep for rows
that no broker holds (gpu_runner.leased)."""

import logging
import time
from collections.abc import Callable
from datetime import datetime

from django.db import DatabaseError, models
from django.utils import timezone
from django_q.tasks import async_task

from evaluation import fairness, leases
from submissions.models import NcuReport, Reverification, Submission

log = logging.getLogger(__name__)

# Handing a task to the broker is retried this many times (a locked database, a Redis blip)
# before the submission is left to the sweep for unqueued submissions.
ENQUEUE_ATTEMPTS = 3


# The order of a hardware's sources in fair_sources (fairness.Waiting.source).
SUBMISSIONS, REVERIFICATIONS = 0, 1


def competition_lane(entry: str) -> Callable[[datetime], fairness.Lane]:
    """A row's lane in the fair rule at a time: its competition's, while the competition runs
    and an operator weighted it (queue_weight above 1); else none, the row is its account's.
    `entry` is the lookup from the row to its competition entry. The competitions app sits
    above this one, so it is named by its fields' lookups, not imported."""
    competition = f"{entry}__competition"

    def lane(now: datetime) -> fairness.Lane:
        running = models.Q(**{
            f"{competition}__starts_at__lte": now,
            f"{competition}__ends_at__gt": now,
            # Weight 1 makes no lane: a lane of weight 1 beside the account's would double the
            # entrant's turns.
            f"{competition}__queue_weight__gt": 1,
        })
        return fairness.Lane(
            key=models.Case(models.When(running, then=models.F(competition)),
                            default=None, output_field=models.IntegerField()),
            weight=models.Case(models.When(running, then=models.F(f"{competition}__queue_weight")),
                               default=1, output_field=models.IntegerField()),
        )

    return lane


def fair_sources(hardware_id: int) -> list[fairness.Source]:
    """What a runner of the hardware claims by the fair rule (evaluation/fairness.py), and whose
    it is: submissions (a model run's samples are its owner's; test runs like any other) and
    re-verifications (their submission's owner's, so a would-be record takes its owner's turn).
    An entry of a running weighted competition, and a re-verification of one, is in that
    competition's lane of its entrant (competition_lane)."""
    return [
        fairness.Source(
            rows=Submission.objects.filter(hardware_id=hardware_id),
            account=fairness.account_expression("user_id", "run__created_by_id"),
            lane=competition_lane("competition_entry"),
        ),
        fairness.Source(
            rows=Reverification.objects.filter(submission__hardware_id=hardware_id),
            account=fairness.account_expression(
                "submission__user_id", "submission__run__created_by_id"
            ),
            may_run=lambda runner_name, row: row.may_run_on(runner_name),
            lane=competition_lane("submission__competition_entry"),
        ),
    ]


def enqueue_evaluation(submission: Submission) -> bool:
    """Hand the evaluation to the hardware's queue; True once the broker has it.

    Never raises: the submission is committed already. When the broker cannot be reached after
    a few tries, `enqueued_at` stays empty and the runners' sweep queues it later; a
    task that arrives twice is harmless, as the runner's claim lets only one evaluate.
    """
    for attempt in range(1, ENQUEUE_ATTEMPTS + 1):
        try:
            async_task(
                "gpu_runner.tasks.evaluate",
                submission.pk,
                cluster=submission.hardware.queue_name,
                task_name=f"evaluate-{submission.pk}",
            )
            break
        except Exception:  # DatabaseError on the ORM broker, a connection error on Redis
            if attempt == ENQUEUE_ATTEMPTS:
                log.exception(
                    "could not enqueue submission %s; the sweep will queue it", submission.pk
                )
                return False
            time.sleep(0.5 * 2 ** (attempt - 1))
    try:
        Submission.objects.filter(pk=submission.pk, enqueued_at__isnull=True).update(
            enqueued_at=timezone.now()
        )
    except DatabaseError:  # the sweep may queue it once more; the claim keeps that harmless
        log.warning("submission %s is enqueued but not marked so", submission.pk)
    return True



def enqueue_once(row, *, task: str) -> bool:
    """Hand a queued re-verification or Nsight Compute report to its hardware's queue, once: the
    conditional update on enqueued_at keeps sweeps in several runners from queueing it twice. A
    broker that is down unmarks it, and the next sweep tries again."""
    model = type(row)
    marked = model.objects.filter(
        pk=row.pk, status=leases.QUEUED, enqueued_at__isnull=True
    ).update(enqueued_at=timezone.now())
    if not marked:
        return False
    try:
        async_task(task, row.pk, cluster=row.submission.hardware.queue_name,
                   task_name=f"{task.rsplit('.', 1)[-1]}-{row.pk}")
    except Exception:
        log.exception("could not enqueue %s %s", model.__name__, row.pk)
        model.objects.filter(pk=row.pk).update(enqueued_at=None)
        return False
    return True


def enqueue_reverification(reverification: Reverification) -> bool:
    return enqueue_once(reverification, task="gpu_runner.tasks.reverify")


def enqueue_ncu_report(report: NcuReport) -> bool:
    return enqueue_once(report, task="gpu_runner.tasks.ncu_report")
