"""Re-verification requests: a second evaluation with fresh secret seeds, on another runner where
there is one, of a would-be record (queued by the runner that stored it), of a result staff
question (admin action), or of a held result its owner asks about again. The runner judges them
(gpu_runner.services, evaluation.stats.settle)."""

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from submissions.events import submission_status_publish
from submissions.models import Evaluation, Reverification, Submission
from submissions.queues import enqueue_reverification
from submissions.quotas import reverify_quota_check


class ReverificationError(Exception):
    def __init__(self, message: str, *, code: str = "invalid") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def reverification_request(
    *, submission: Submission, reason: str, requested_by=None
) -> Reverification:
    """Queue a second evaluation of the submission with fresh secret seeds.

    It checks the submission's latest own evaluation, and prefers any runner but the one that
    did that evaluation (Reverification.may_run_on). For a new record (reason NEW_RECORD) the
    submission is held off the boards until it passes. Call it inside the transaction that
    decides it: the task is queued after the commit. ReverificationError when there is nothing
    to re-verify yet, or one is already queued or running.
    """
    checked = (
        submission.evaluations.filter(purpose=Evaluation.Purpose.SUBMISSION)
        .order_by("-finished_at", "-id")
        .first()
    )
    if submission.status != Submission.Status.FINISHED or checked is None:
        raise ReverificationError(f"Submission {submission.pk} has not been evaluated yet.",
                                  code="not_evaluated")
    if submission.test_run:
        raise ReverificationError(
            f"Submission {submission.pk} is a test run: it is never ranked, so there is "
            "nothing to re-verify. Submit it for ranking instead.", code="test_run")
    try:
        with transaction.atomic():
            reverification = Reverification.objects.create(
                submission=submission,
                reason=reason,
                checked_evaluation=checked,
                avoid_runner=checked.runner_name,
                requested_by=requested_by if getattr(requested_by, "pk", None) else None,
            )
    except IntegrityError:  # one_open_reverification
        raise ReverificationError(
            f"Submission {submission.pk} is already being re-verified.", code="already_open"
        ) from None
    if reason in (Reverification.Reason.NEW_RECORD, Reverification.Reason.OWNER):
        submission.hold_for_reverification()
    transaction.on_commit(lambda: enqueue_reverification(reverification), robust=True)
    return reverification


def held_on_timing(submission: Submission) -> bool:
    """Whether the submission's result is off the boards on its timing alone, which its owner
    may ask to have evaluated again: a holding note on it (Evaluation.timing_held: the judge's
    clock confirmed no timing of it), or a re-verification held as "timing not reproduced"
    before such results ranked at their slowest timing (Reverification.held). A result that
    ranks at its slowest timing is not: asking again could only replace a slow figure by a
    luckier one."""
    result = submission.latest_evaluation
    if result is None:
        return False
    latest = submission.reverifications.select_related("evaluation").first()
    if latest is not None and not latest.is_finished:
        return False
    return result.timing_held or (latest is not None and latest.held)


def reverification_request_by_owner(*, user, submission: Submission) -> Reverification:
    """Another attempt at re-verification, asked for by the submission's owner (or staff): only
    for a result held off the boards on its timing (held_on_timing), within
    QUOTA_REVERIFICATIONS_PER_DAY a UTC day (staff exempt). The submission is pending again
    until it lands, and the re-verification goes as any other: a second evaluation with fresh
    seeds, a third where the first two disagree.

    ReverificationError (code forbidden, not_held, already_open, not_evaluated) or
    QuotaExceeded (quota_reverifications).
    """
    if not (user.is_staff or (submission.user_id and submission.user_id == user.pk)):
        raise ReverificationError(
            "Only the submission's owner and staff can ask for a re-verification.",
            code="forbidden",
        )
    with transaction.atomic():
        # One request at a time per user passes the quota check (the row lock orders them).
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        latest = submission.reverifications.first()
        if latest is not None and not latest.is_finished:
            raise ReverificationError(
                f"Submission {submission.pk} is already being re-verified.", code="already_open"
            )
        if not held_on_timing(submission):
            raise ReverificationError(
                "Only a result held because the judge's clock did not confirm its timing can be "
                "re-verified on request (one whose evaluations did not agree ranks at the "
                "slowest of them).",
                code="not_held",
            )
        reverify_quota_check(user=user)
        reverification = reverification_request(
            submission=submission, reason=Reverification.Reason.OWNER, requested_by=user
        )
        # Its page and followers see it pending again.
        submission_status_publish(submission=submission)
    return reverification
