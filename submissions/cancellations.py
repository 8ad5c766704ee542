"""Cancelling work before its verdict: one submission or a whole batch, by its owner (or staff),
and everything an account has waiting or running when an operator disables it. The HTML view,
the API, `kb` and the admin call these.

A cancelled submission is never claimed (the claim takes queued rows and lapsed running ones
only: evaluation/leases.py), stores no evaluation and so never ranks, and its quota reservation
goes with it (submissions/quotas.py reserves for queued and running rows); one cancelled while
running is charged the time it ran. Its runner no longer holds its lease, sees that at its next
heartbeat and kills the evaluation (gpu_runner.services).

A finished submission whose would-be record is being re-verified cannot be cancelled: the
re-verification decides whether the record stands, and its owner stopping it would keep a
result that did not reproduce from being seen.
"""

import logging

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q

from submissions.events import submission_status_publish
from submissions.models import Batch, Reverification, Submission

log = logging.getLogger(__name__)


class CancelError(Exception):
    """A cancel that cannot be done; `code` says why (forbidden, already_ended, reverifying)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def may_cancel(submission: Submission, user) -> bool:
    """Its owner and staff (as for a re-verification or a profile: selectors.can_act_on)."""
    return bool(
        user is not None and user.is_authenticated
        and (user.is_staff or (submission.user_id is not None
                               and submission.user_id == user.pk))
    )


def _cancel(submission: Submission, *, by) -> bool:
    """Cancel one open submission and tell its followers, once the change is committed."""
    if not submission.mark_cancelled(by=by):
        return False
    transaction.on_commit(lambda: submission_status_publish(submission=submission), robust=True)
    return True


def submission_cancel(*, submission: Submission, user) -> Submission:
    """Cancel a queued or running submission (test runs included) of `user`'s, or any as staff.

    CancelError: forbidden (not theirs), already_ended (finished or cancelled before), or
    reverifying (finished, its record's re-verification open: never its owner's to stop)."""
    if not may_cancel(submission, user):
        raise CancelError("Only the submission's owner and staff can cancel it.",
                          code="forbidden")
    with transaction.atomic():
        if _cancel(submission, by=user):
            return submission
    submission.refresh_from_db()
    if submission.reverifications.filter(status__in=Reverification.OPEN).exists():
        raise CancelError(
            f"Submission {submission.pk} is finished and its result is being re-verified with "
            "fresh seeds, which decides whether it ranks; a re-verification cannot be "
            "cancelled.", code="reverifying")
    raise CancelError(f"Submission {submission.pk} is already {submission.status}; only a "
                      "queued or running one can be cancelled.", code="already_ended")


def batch_cancel(*, batch: Batch, user) -> Batch:
    """Cancel every queued or running submission of a batch (those already finished keep their
    results) and mark the batch cancelled. CancelError: forbidden, or already_ended where
    nothing of it was waiting or running and it was cancelled before."""
    if not (user is not None and user.is_authenticated
            and (user.is_staff or (batch.user_id is not None and batch.user_id == user.pk))):
        raise CancelError("Only the batch's owner and staff can cancel it.", code="forbidden")
    with transaction.atomic():
        cancelled = sum(
            _cancel(submission, by=user)
            for submission in batch.submissions.filter(status__in=Submission.OPEN)
        )
        if batch.cancelled_at is not None and not cancelled:
            raise CancelError(f"Batch {batch.pk} is already cancelled.", code="already_ended")
        batch.mark_cancelled(by=user)
    return batch


def account_work(user):
    """An account's submissions waiting or running: its own, and its model runs' samples (a
    run's samples are its creator's, as fair share counts them)."""
    return Submission.objects.filter(
        Q(user=user) | Q(run__created_by=user), status__in=Submission.OPEN
    )


def account_disable(*, user, by) -> int:
    """An operator disables an account: it can no longer log in (Django refuses an inactive
    user) nor use its tokens (accounts.services.api_token_authenticate reads live users only),
    and every submission it has waiting or running is cancelled. Its re-verifications go on:
    they decide whether a record already stored stands. Returns how many were cancelled."""
    with transaction.atomic():
        get_user_model().objects.filter(pk=user.pk).update(is_active=False)
        user.is_active = False
        cancelled = sum(_cancel(submission, by=by) for submission in account_work(user))
    log.info("account %s disabled by %s: %s submissions cancelled", user, by, cancelled)
    return cancelled
