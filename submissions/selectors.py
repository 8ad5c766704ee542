"""Read-side helpers shared by pages, the API and live events."""

from submissions.models import Submission


def queue_position(submission: Submission) -> int | None:
    """1 for the next to run on its hardware; None once it left the queue."""
    if submission.status != Submission.Status.QUEUED:
        return None
    ahead = Submission.objects.filter(
        hardware_id=submission.hardware_id,
        status=Submission.Status.QUEUED,
        created_at__lt=submission.created_at,
    ).count()
    return ahead + 1


def evaluation_summary(evaluation) -> dict | None:
    if evaluation is None:
        return None
    return {
        "id": evaluation.pk,
        "verdict": evaluation.verdict,
        "correct": evaluation.correct,
        "candidate_ms": evaluation.candidate_median_ms,
        "reference_ms": evaluation.reference_median_ms,
        "speedup": evaluation.speedup,
        "speedup_eager": evaluation.speedup_eager,
        "speedup_compile": evaluation.speedup_compile,
        "flags": evaluation.flags,
        "error": evaluation.error,
    }


def submission_status_payload(submission: Submission) -> dict:
    evaluation = (
        submission.latest_evaluation if submission.status == Submission.Status.FINISHED else None
    )
    return {
        "submission": submission.pk,
        "status": submission.status,
        "verdict": submission.verdict or None,
        "queue_position": queue_position(submission),
        "progress": submission.progress,
        "attempts": submission.attempts,
        "evaluation": evaluation_summary(evaluation),
    }
