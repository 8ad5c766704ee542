"""Read-side helpers shared by pages, the API and live events."""

from collections.abc import Iterable

from django.conf import settings
from django.db.models import Count, Q

from evaluation import scoring
from evaluation.harness import verdicts
from evaluation.harness.errors import clean_text, truncate
from evaluation.models import Evaluation, Hardware, Runner
from submissions.models import Submission

# Characters of one log field shown on a page or in the API (head and tail, with a marker).
DEFAULT_LOG_DISPLAY_CHARS = 64 * 1024
LOG_FIELDS = ("error", "compile_log", "traceback", "logs")


def display_log(text: str | None) -> str:
    """A stored log made fit to show: terminal escapes and control characters stripped, cut to
    LOG_DISPLAY_MAX_CHARS with a marker. Escaping for HTML is the template's job."""
    limit = int(getattr(settings, "LOG_DISPLAY_MAX_CHARS", DEFAULT_LOG_DISPLAY_CHARS))
    return truncate(clean_text(text or ""), limit)


def latest_evaluations(*, submission_ids: Iterable[int], hardware_id: int) -> list[dict]:
    """Each named submission's result on this hardware: its latest evaluation there, whatever
    its purpose (a re-verification replaces the first evaluation), as a scoring row.

    Ids first, then their evaluations, and the hardware checked here: given a hardware filter,
    SQLite's planner walks every evaluation of that hardware instead of these few.
    """
    evaluations = (
        Evaluation.objects.filter(submission_id__in=list(submission_ids))
        .order_by("submission_id", "-finished_at", "-id")
        .values(*scoring.ROW_FIELDS)
    )
    latest: dict[int, dict] = {}
    for evaluation in evaluations:
        if evaluation["hardware_id"] == hardware_id:
            latest.setdefault(evaluation["submission_id"], evaluation)
    return list(latest.values())


# ---- who sees an evaluation's details ------------------------------------------------------------
#
# Compiler diagnostics, tracebacks, logs and error text quote the submitted source, which a
# private problem keeps from everyone but the submitter: they go to the owner and staff only
# (can_see_details, the one rule); everyone else gets the verdict and one of these messages.
# Pages, the status JSON, the REST API and live events all build their error text here.

GENERIC_ERRORS = {verdict.name: verdict.message for verdict in verdicts.ALL if verdict.message}
GENERIC_ERROR = "The evaluation reported an error."


def can_see_details(submission: Submission, user) -> bool:
    """Compiler output, tracebacks, logs, error text and seeds: the owner and staff only."""
    return bool(user and user.is_authenticated and (user.is_staff or user.pk == submission.user_id))


def shown_error(evaluation, *, details: bool) -> str:
    """The evaluation's error as display_log shows it, or a generic message without details."""
    if evaluation is None or not evaluation.error:
        return ""
    if details:
        return display_log(evaluation.error)
    return GENERIC_ERRORS.get(evaluation.verdict, GENERIC_ERROR)


def evaluation_logs(evaluation, *, details: bool) -> dict[str, str]:
    """The evaluation's error and logs as display_log shows them; without details, the generic
    error and no logs."""
    if evaluation is None:
        return {}
    logs = {
        field: (display_log(getattr(evaluation, field)) if details else "") for field in LOG_FIELDS
    }
    logs["error"] = shown_error(evaluation, details=details)
    return logs


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


def evaluation_summary(evaluation, *, details: bool = False) -> dict | None:
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
        "error": shown_error(evaluation, details=details),
    }


def submission_status_payload(submission: Submission, *, details: bool = False) -> dict:
    """The status as pages poll it and live events carry it. Events go to every viewer, so they
    are built without details; with_details gives a viewer who may see them the full error."""
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
        "evaluation": evaluation_summary(evaluation, details=details),
    }


def with_details(payload: dict) -> dict:
    """A status payload (a live event's) with its evaluation's full error text, for a viewer
    whom can_see_details allows."""
    summary = payload.get("evaluation")
    if not summary or not summary.get("error"):
        return payload
    evaluation = Evaluation.objects.filter(pk=summary["id"]).first()
    return {**payload, "evaluation": {**summary, "error": shown_error(evaluation, details=True)}}


SUBMISSION_FILTERS = ("status", "verdict", "backend", "hardware", "level", "number")


def user_submissions(*, user, filters: dict):
    """A user's own submissions, newest first, narrowed by the filters that are set."""
    submissions = Submission.objects.filter(user=user).select_related("problem", "hardware")
    for field in ("status", "verdict", "backend"):
        if filters.get(field):
            submissions = submissions.filter(**{field: filters[field]})
    if filters.get("hardware"):
        submissions = submissions.filter(hardware__slug=filters["hardware"])
    if filters.get("level"):
        submissions = submissions.filter(problem__level=filters["level"])
    if filters.get("number"):
        submissions = submissions.filter(problem__number=filters["number"])
    if filters.get("problem"):
        submissions = submissions.filter(problem__slug__icontains=filters["problem"])
    return submissions


def hardware_overview() -> list[dict]:
    """Every hardware with what it serves, its queue and its live runners (two grouped queries)."""
    rows = Hardware.objects.annotate(
        queued=Count("submissions", filter=Q(submissions__status=Submission.Status.QUEUED)),
        running=Count("submissions", filter=Q(submissions__status=Submission.Status.RUNNING)),
    )
    online = dict(
        Runner.objects.filter(last_seen__gte=Runner.online_since())
        .values_list("hardware_id")
        .annotate(n=Count("id"))
        .values_list("hardware_id", "n")
    )
    return [
        {"hardware": hw, "queued": hw.queued, "running": hw.running, "online": online.get(hw.pk, 0)}
        for hw in rows
    ]
