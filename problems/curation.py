"""Curation workflows the site starts (admin, commands): asking a runner to validate a problem.

The checks themselves run on a runner (gpu_runner.curation) in the sandboxed harness; the web
process never runs reference code.
"""

from django.db import transaction
from django_q.tasks import async_task

from evaluation.models import Hardware
from problems.models import Problem, Validation


class ValidationRequestError(ValueError):
    pass


def validation_request(
    *, problem: Problem, hardware: Hardware, requested_by=None, enqueue: bool = True
) -> Validation:
    """Queue a validation of the problem's current reference on a runner of `hardware`.

    enqueue=False only records it, for a caller that runs it on this host itself.
    """
    if problem.current_version_id is None:
        raise ValidationRequestError(f"{problem.slug} has no reference to validate")
    validation = Validation.objects.create(
        problem_version_id=problem.current_version_id,
        hardware=hardware,
        requested_by=requested_by if getattr(requested_by, "pk", None) else None,
    )
    if not enqueue:
        return validation
    # After the commit, so the runner that picks the task up always finds the row.
    transaction.on_commit(
        lambda: async_task("gpu_runner.tasks.validate", validation.pk, cluster=hardware.queue_name)
    )
    return validation
