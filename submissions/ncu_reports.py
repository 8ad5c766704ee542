"""Nsight Compute report requests: a profile of a submission's own kernels, asked for by its
owner or staff; a runner of its hardware makes it (gpu_runner.services.ncu_report_make)."""

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from submissions.models import NcuReport, Submission
from submissions.queues import enqueue_ncu_report
from submissions.quotas import ncu_quota_check


class NcuRequestError(Exception):
    def __init__(self, message: str, *, code: str = "invalid") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def ncu_report_request(*, user, submission: Submission) -> NcuReport:
    """Queue an Nsight Compute report on the submission's kernels, for its owner or staff.

    NcuRequestError when the user may not ask, the submission has not been evaluated yet, or a
    report is already queued or running; QuotaExceeded past the daily quota. The task goes to the
    submission's hardware queue after the commit; a runner without ncu answers "unavailable".
    """
    if not (user.is_staff or (submission.user_id and submission.user_id == user.pk)):
        raise NcuRequestError("Only the submission's owner and staff can ask for a profile.",
                              code="forbidden")
    if submission.status != Submission.Status.FINISHED:
        raise NcuRequestError(f"Submission {submission.pk} has not been evaluated yet.",
                              code="not_evaluated")
    with transaction.atomic():
        # One request at a time per user passes the quota check (the row lock orders them).
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        ncu_quota_check(user=user)
        try:
            with transaction.atomic():
                report = NcuReport.objects.create(submission=submission, requested_by=user)
        except IntegrityError:  # one_open_ncu_report
            raise NcuRequestError(
                f"A report on submission {submission.pk} is already queued or running.",
                code="already_open",
            ) from None
        transaction.on_commit(lambda: enqueue_ncu_report(report), robust=True)
    return report
