"""Leased work, every kind alike (gpu_runner/leased.py's table over evaluation/leases.py): a row
whose runner died goes back to the queue with its task, one that killed its runners
SUBMISSION_MAX_ATTEMPTS times is stopped with a message saying so, and a runner presumed dead
that comes back cannot overwrite the result of the runner that took over.

Each test runs once per kind of the table; what differs between the kinds (how a row is made,
how its runner stores a result, where its message is) is in KIND_HELPERS below.
"""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django.utils.module_loading import import_string
from django_q.models import OrmQ

from gpu_runner import leased
from gpu_runner.curation import validation_store
from gpu_runner.services import _store_result, _store_reverification
from problems.curation import validation_request
from problems.models import Validation
from submissions.models import NcuReport, Reverification, Submission
from submissions.services import submission_create
from tests.conftest import kernel_source, stats
from tests.leaderboard_factory import make_result

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_reverification(settings):
    # A first correct result would otherwise queue a re-verification beside the row under test.
    settings.REVERIFY_NEW_RECORDS = False


def lapse(row) -> None:
    """Its runner stops renewing the lease: the runner died, or is presumed dead."""
    type(row).objects.filter(pk=row.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )


def fresh(row):
    """The row as another runner loads it."""
    return type(row).objects.get(pk=row.pk)


def queued_tasks(hardware) -> list[tuple[str, tuple]]:
    return [(q.task["func"], tuple(q.task["args"])) for q in OrmQ.objects.filter(
        key=hardware.queue_name)]


def incorrect(runner_name: str) -> dict:
    """A harness result (an incorrect kernel: it calls no re-verification or comparison)."""
    return {"verdict": "incorrect", "correct": False, "error": f"by {runner_name}",
            "seeds": {"seed": 1}}


@dataclass
class KindHelpers:
    make: Any  # (user, problem, hardware) -> a queued row
    store: Any  # (row, runner_name) -> stores a result the way the kind's runner does
    stored_by: Any  # row -> the runner whose stored result stands
    message: Any  # row -> where a stopped row says why


def make_reverification(user, problem, hardware) -> Reverification:
    checked = make_result(problem=problem, hardware=hardware, user=user)
    return Reverification.objects.create(
        submission=checked.submission, reason=Reverification.Reason.ADMIN,
        checked_evaluation=checked,
    )


KIND_HELPERS = {
    Submission: KindHelpers(
        make=lambda user, problem, hardware: submission_create(
            user=user, problem=problem, source=kernel_source("relu_correct.py"),
            backend="torch", hardware=hardware,
        ),
        store=lambda row, name: _store_result(row, incorrect(name), runner_name=name),
        stored_by=lambda row: row.evaluations.get().runner_name,
        message=lambda row: row.evaluations.get().error,
    ),
    Reverification: KindHelpers(
        make=make_reverification,
        store=lambda row, name: _store_reverification(row, incorrect(name), runner_name=name),
        stored_by=lambda row: row.evaluation.runner_name,
        message=lambda row: row.message,
    ),
    Validation: KindHelpers(
        make=lambda user, problem, hardware: validation_request(
            problem=problem, hardware=hardware, enqueue=False
        ),
        store=lambda row, name: validation_store(
            row, {"mode": "validate", "status": "passed", "findings": [],
                  "reference": stats(2.0), "environment": {"runner": name}},
            seed=1, time_limit_s=60, runner_name=name,
        ),
        stored_by=lambda row: row.environment["runner"],
        message=lambda row: row.findings[0]["message"],
    ),
    NcuReport: KindHelpers(
        make=lambda user, problem, hardware: NcuReport.objects.create(
            submission=make_result(problem=problem, hardware=hardware, user=user).submission
        ),
        store=lambda row, name: row.finish(runner_name=name, status="unavailable", message=name),
        stored_by=lambda row: row.message,
        message=lambda row: row.message,
    ),
}

every_kind = pytest.mark.parametrize("kind", leased.KINDS, ids=lambda kind: kind.model.__name__)


def test_the_table_holds_every_leased_model_with_a_task_that_exists():
    assert set(KIND_HELPERS) == {kind.model for kind in leased.KINDS}
    for kind in leased.KINDS:
        assert callable(import_string(kind.task))


@every_kind
def test_a_row_whose_lease_lapsed_is_requeued_by_the_sweep_with_its_task_once(
    kind, user, relu_problem, cpu_hardware
):
    row = KIND_HELPERS[kind.model].make(user, relu_problem, cpu_hardware)
    assert row.claim(runner_name="dead:1", lease_seconds=60)
    OrmQ.objects.all().delete()

    # While its runner lives (the lease is current), the sweep leaves it alone.
    assert leased.sweep(hardware=cpu_hardware)[kind.name] == 0
    assert fresh(row).status == "running"

    lapse(row)
    assert leased.sweep(hardware=cpu_hardware)[kind.name] == 1
    row = fresh(row)
    assert row.status == "queued" and row.lease_expires_at < timezone.now()
    assert queued_tasks(cpu_hardware) == [(kind.task, (row.pk,))]
    assert leased.sweep(hardware=cpu_hardware)[kind.name] == 0  # queued once, not every sweep
    assert fresh(row).claim(runner_name="next:1", lease_seconds=60)


@every_kind
def test_a_row_that_killed_its_runners_too_often_is_never_claimed_again_and_the_sweep_stops_it(
    kind, user, relu_problem, cpu_hardware, settings
):
    row = KIND_HELPERS[kind.model].make(user, relu_problem, cpu_hardware)
    type(row).objects.filter(pk=row.pk).update(attempts=settings.SUBMISSION_MAX_ATTEMPTS - 1)
    assert fresh(row).claim(runner_name="dead:3", lease_seconds=60)
    lapse(row)
    OrmQ.objects.all().delete()

    assert not fresh(row).claim(runner_name="next:1", lease_seconds=60)
    assert leased.sweep(hardware=cpu_hardware)[kind.name] == 0
    row = fresh(row)
    assert row.status not in ("queued", "running") and row.lease_expires_at is None
    crashed = kind.crashed.format(attempts=settings.SUBMISSION_MAX_ATTEMPTS)
    assert crashed in KIND_HELPERS[kind.model].message(row)
    assert queued_tasks(cpu_hardware) == []
    assert not fresh(row).claim(runner_name="next:1", lease_seconds=60)


@every_kind
def test_a_runner_presumed_dead_cannot_overwrite_the_result_of_the_runner_that_took_over(
    kind, user, relu_problem, cpu_hardware
):
    helpers = KIND_HELPERS[kind.model]
    row = helpers.make(user, relu_problem, cpu_hardware)
    late = fresh(row)
    assert late.claim(runner_name="late:1", lease_seconds=60)
    lapse(row)  # its heartbeat stalled: presumed dead
    successor = fresh(row)
    assert successor.claim(runner_name="next:1", lease_seconds=60)

    helpers.store(successor, "next:1")
    helpers.store(late, "late:1")  # it was alive after all, and finishes late

    assert helpers.stored_by(fresh(row)) == "next:1"
