"""Leaderboard rows: the best ranking evaluation per participant, per problem and hardware."""

from evaluation.models import Evaluation
from kbsite.live import board_group, publish


def participant_label(submission) -> str:
    if submission.model_id:
        return str(submission.model)
    return submission.user.username if submission.user_id else "anonymous"


def board_rows(*, problem, hardware) -> list[dict]:
    evaluations = (
        Evaluation.objects.filter(
            submission__problem=problem,
            hardware=hardware,
            correct=True,
            purpose=Evaluation.Purpose.SUBMISSION,
        )
        .select_related("submission__user", "submission__model")
        .order_by("candidate_median_ms", "finished_at")
    )
    best: dict[str, dict] = {}
    for evaluation in evaluations:
        if evaluation.flags or evaluation.candidate_median_ms is None:
            continue
        submission = evaluation.submission
        key = submission.participant
        if key in best:
            continue
        best[key] = {
            "rank": len(best) + 1,
            "participant": participant_label(submission),
            "submission_id": submission.pk,
            "candidate_ms": evaluation.candidate_median_ms,
            "reference_ms": evaluation.reference_median_ms,
            "speedup": evaluation.speedup,
            "speedup_eager": evaluation.speedup_eager,
            "speedup_compile": evaluation.speedup_compile,
            "backend": submission.backend,
            "precision": submission.precision,
            "date": evaluation.finished_at.isoformat(),
        }
    return list(best.values())


def board_refresh_for(evaluation: Evaluation) -> None:
    """Tell open boards of this problem and hardware that their rows may have changed."""
    submission = evaluation.submission
    publish(
        board_group(submission.problem_id, evaluation.hardware.slug),
        {
            "type": "board",
            "problem": submission.problem_id,
            "hardware": evaluation.hardware.slug,
            "rows": board_rows(problem=submission.problem, hardware=evaluation.hardware),
        },
    )
