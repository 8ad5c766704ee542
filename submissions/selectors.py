"""Read-side helpers shared by pages, the API and live events."""

import math
import statistics
import sys
from collections.abc import Iterable

from django.conf import settings
from django.db.models import Count, Q, TextChoices
from django.utils import timezone

from evaluation import compile_log, fairness, scoring, stats
from evaluation.models import Hardware, Runner
from evaluator import verdicts
from evaluator.errors import clean_text, truncate
from evaluator.static_report import without_reference
from kbsite.templatetags.kbsite_tags import seconds_label
from submissions.models import Evaluation, Reverification, Submission
from submissions.queues import SUBMISSIONS, fair_sources

# Characters of one log field shown on a page or in the API (head and tail, with a marker).
DEFAULT_LOG_DISPLAY_CHARS = 64 * 1024
LOG_FIELDS = ("error", "compile_log", "traceback", "logs")


def _host_paths() -> dict[str, str]:
    """This host's own paths, replaced in logs before compile_log's generic patterns (runners
    of the embedded setup share them; other hosts' are caught by the patterns)."""
    known = {"<build>": str(settings.BUILD_CACHE_DIR), "<site>": str(settings.BASE_DIR)}
    if sys.prefix != sys.base_prefix:  # a virtualenv; a system prefix (/usr) says too little
        known["<venv>"] = sys.prefix
    return known


def display_log(text: str | None) -> str:
    """A stored log made fit to show: terminal escapes and control characters stripped, the
    harness's warnings left out and host paths replaced by placeholders (evaluation.compile_log),
    cut to LOG_DISPLAY_MAX_CHARS with a marker. Escaping for HTML is the template's job."""
    limit = int(getattr(settings, "LOG_DISPLAY_MAX_CHARS", DEFAULT_LOG_DISPLAY_CHARS))
    return truncate(compile_log.readable(clean_text(text or ""), known=_host_paths()), limit)


def first_compile_error(evaluation) -> dict | None:
    """The compiler's first error of a failed build, at the submitted file's line where it maps
    (evaluation.compile_log.first_error), its text shown as display_log shows it. Derived from
    the source: only for a viewer whom can_see_source allows."""
    if evaluation is None or evaluation.verdict != Evaluation.Verdict.COMPILE_ERROR:
        return None
    log = evaluation.compile_log or evaluation.error or ""
    found = compile_log.first_error(clean_text(log), source=evaluation.submission.source)
    if found is None:
        return None
    known = _host_paths()
    return {
        **found,
        "message": compile_log.scrub_paths(found["message"], known=known),
        "excerpt": compile_log.scrub_paths(found["excerpt"], known=known),
        "summary": compile_log.scrub_paths(found["summary"], known=known),
    }


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


# ---- who sees a source and what is derived from it ----------------------------------------------
#
# A kernel's source and everything derived from it (compiler output, tracebacks, logs, the error
# text, each failed trial's error, note and diagnosis, the static report with its kernel and
# helper names, profiles with kernel names, Nsight Compute reports, the source's hash) go to
# whoever may see the source, and to no one else: can_see_source is the one rule, and every page,
# the status JSON, the REST API, live events and exports ask it. Everyone else gets the verdict,
# the timings, each trial's numbers and one of these messages. What the judge quotes of the
# problem's reference (the values the static report compares the kernel's constants with, the
# reference's side of a profile) goes by the reference's own rule on top (can_see_reference):
# a private problem's submitter sees their own kernel's, never the reference's.

GENERIC_ERRORS = {verdict.name: verdict.message for verdict in verdicts.ALL if verdict.message}
GENERIC_ERROR = "The evaluation reported an error."


def can_act_on(submission: Submission, user) -> bool:
    """The owner and staff: they may ask for its re-verification or an Nsight Compute report,
    and see its seeds (the judge's, not the source's: shown to the submitter only)."""
    return bool(
        user is not None
        and user.is_authenticated
        and (user.is_staff or user.pk == submission.user_id)
    )


def can_see_source(submission: Submission, user) -> bool:
    """Whether `user` may see the submission's source, and so everything derived from it.

    The owner and staff always. Others: never while a competition hides its entries' code (until
    its end, code_hidden_until), else where the problem's code is public to them
    (Problem.reference_visible_to: a visible problem, its code public or public after a date).
    A private problem's submissions, a draft's or a held problem's stay with their owners.
    """
    if can_act_on(submission, user):
        return True
    if submission.code_hidden_until is not None and timezone.now() < submission.code_hidden_until:
        return False
    return submission.problem.reference_visible_to(user)


def can_see_reference(submission: Submission, user) -> bool:
    """Whether `user` may see what the judge quotes of the submission's problem reference: the
    reference's own rule (Problem.reference_visible_to: staff, else everyone once its code is
    public), its owner included, who writes a kernel for a reference they may not read."""
    return submission.problem.reference_visible_to(user)


def can_see_submission(submission: Submission, user) -> bool:
    """Whether the submission is there at all for `user` (its page, status, API and live
    events): for its owner and staff, and for others where its problem is
    (Problem.is_visible_to: a draft's or a held problem's submissions are not)."""
    return can_act_on(submission, user) or submission.problem.is_visible_to(user)


def shown_error(evaluation, *, details: bool) -> str:
    """The evaluation's error as display_log shows it, or a generic message without details."""
    if evaluation is None or not evaluation.error:
        return ""
    if details:
        return display_log(evaluation.error)
    return GENERIC_ERRORS.get(evaluation.verdict, GENERIC_ERROR)


# A trial as shown to whoever may not see the source: its numbers and the exploit checks' names.
# Its text (the kernel's error, the note on a wrong output that quotes values and shapes, the
# diagnosis) follows the source.
TRIAL_PUBLIC_FIELDS = ("k", "passed", "max_abs_diff", "mean_abs_diff", "flags",
                       "unwritten_elements", "nonfinite")


def shown_trials(evaluation, *, details: bool) -> list[dict]:
    """The evaluation's correctness trials as a viewer sees them: whole with details (a trial's
    error as display_log shows it), else TRIAL_PUBLIC_FIELDS alone."""
    if evaluation is None:
        return []
    trials = [trial for trial in evaluation.trials or [] if isinstance(trial, dict)]
    if not details:
        return [{key: trial[key] for key in TRIAL_PUBLIC_FIELDS if key in trial}
                for trial in trials]
    return [{**trial, "error": display_log(trial["error"])} if trial.get("error") else trial
            for trial in trials]


def shown_static_report(evaluation, *, details: bool, reference: bool) -> dict | None:
    """The static report (and the judge's checks stored beside it) for a viewer with details
    (can_see_source), None for others; without what it quotes of the reference for a viewer who
    may not see the reference (can_see_reference; static_report.without_reference)."""
    if evaluation is None or not details:
        return None
    report = evaluation.static_report or {}
    return report if reference else without_reference(report)


def shown_profile(view: dict | None, *, reference: bool) -> dict | None:
    """A profile view (evaluation.profiles.profile_view) without the reference's side (its
    kernels name what the reference computes) for a viewer who may not see the reference."""
    if view is None or reference:
        return view
    return {**view, "sides": [side for side in view.get("sides") or []
                              if side.get("key") != "reference"]}


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
    """1 for the next to run on its hardware; None once it left the queue.

    Its place in the order the runners claim by (evaluation/fairness.py, the one rule: round-
    robin by lane, an account's or a weighted running competition's entries, oldest first
    within one, weights), among the submissions and
    re-verifications a runner of the hardware can claim, played forward from now: work of other
    accounts submitted later may still come before it, and goes after it once its turn is due.
    """
    if submission.status != Submission.Status.QUEUED:
        return None
    return fairness.position(fair_sources(submission.hardware_id), SUBMISSIONS, submission.pk)


# How many of the hardware's latest evaluations the wait estimate takes its median from.
ESTIMATE_SAMPLE = 20


def evaluation_seconds(*, hardware_id: int, sample: int = ESTIMATE_SAMPLE) -> float | None:
    """The median duration of the hardware's latest evaluations (start to finish), or None
    when it has none yet."""
    spans = Evaluation.objects.filter(hardware_id=hardware_id, started_at__isnull=False).order_by(
        "-finished_at"
    ).values_list("started_at", "finished_at")[:sample]
    durations = [(end - start).total_seconds() for start, end in spans if end >= start]
    return statistics.median(durations) if durations else None


def queue_estimate(submission: Submission) -> dict | None:
    """Where a queued submission stands, and about how long until its result: None once it
    left the queue.

    {"position", "runners" (online ones of its hardware), "seconds" (None without an online
    runner or without evaluations to time)}. Every runner takes one evaluation at a time: the
    work ahead of it and the evaluations running now, shared among the online runners, each
    taking the median of the hardware's latest evaluations (evaluation_seconds), then its own.
    """
    position = queue_position(submission)
    if position is None:
        return None
    runners = Runner.objects.filter(
        hardware_id=submission.hardware_id, last_seen__gte=Runner.online_since()
    ).count()
    median = evaluation_seconds(hardware_id=submission.hardware_id)
    seconds = None
    if runners and median is not None:
        now = timezone.now()
        running = Submission.objects.filter(
            hardware_id=submission.hardware_id,
            status=Submission.Status.RUNNING,
            lease_expires_at__gte=now,
        ).count() + Reverification.objects.filter(
            submission__hardware_id=submission.hardware_id,
            status=Reverification.Status.RUNNING,
            lease_expires_at__gte=now,
        ).count()
        rounds = math.ceil((position + running) / runners)
        seconds = round(rounds * median)
    return {"position": position, "runners": runners, "seconds": seconds}


def queue_text(estimate: dict | None, *, hardware: str) -> str:
    """The estimate in words, as the submission page shows it (static/kbsite/live.js says the
    same from the status payload)."""
    if not estimate:
        return ""
    text = f"position {estimate['position']} in the queue"
    if not estimate["runners"]:
        return f"{text}; no runner of {hardware} is online now"
    if estimate["seconds"] is not None:
        return f"{text}, result in about {max(estimate['seconds'], 1)} s"
    return text


# ---- a submission's evaluations: what each was, its own figures, and how long it all took -------

# What each evaluation of a submission was (Reverification.compare_timing's roles), as pages say.
EVALUATION_LABELS = {
    "first": "First evaluation",
    "second": "Re-verification (second evaluation)",
    "third": "Third evaluation",
}
# Why a re-verified result ranks with the figure it has (stats.settle's outcomes).
RANKED_FIGURE_WHY = {
    stats.AGREE: "the slower of two that agree",
    stats.APART: "the slowest, as no two of its evaluations agree",
}


def _seconds(start, end) -> float | None:
    if start is None or end is None:
        return None
    return max((end - start).total_seconds(), 0.0)


def ranked_figure(evaluation) -> dict | None:
    """Whose figures a re-verified result carries (a re-verification's evaluation is stored with
    the timing it ranks with: Reverification.compare_timing's `ranked_on`) and why, in words:
    {"role", "outcome", "text"}; None for an evaluation no comparison decided."""
    comparison = Reverification.timing_comparison(evaluation)
    role = comparison.get("ranked_on")
    if role not in EVALUATION_LABELS:
        return None
    why = RANKED_FIGURE_WHY.get(comparison.get("outcome"), "")
    return {"role": role, "outcome": comparison.get("outcome"),
            "text": f"The figures it ranks with: the {role} evaluation's"
                    + (f", {why}" if why else "")}


def submission_evaluations(submission: Submission) -> list[dict]:
    """Each evaluation of the submission in the order they ran, as its page lists them:
    labelled by what it was (the first; a re-verification's second evaluation; a third where
    those two disagreed), with its own figures, its 95% interval where its timing was compared,
    how long it waited in the queue (from when it was asked for: the submission, the
    re-verification, the disagreement) and how long it ran.

    A re-verification's evaluation is stored with the timing its result ranks with, its own
    kept in its comparison (`<role>_timing`): its own is shown here, and `counts` marks the
    evaluation whose figure the result carries (the latest one's, unless it took another's).

    Each: {"evaluation", "role", "label", "candidate_ms", "reference_ms", "speedup",
    "interval", "set_aside", "queue_seconds", "seconds", "counts"}.
    """
    evaluations = list(submission.evaluations.order_by("finished_at", "id"))
    if not evaluations:
        return []
    by_id = {evaluation.pk: evaluation for evaluation in evaluations}
    rounds = list(submission.reverifications.order_by("created_at", "id"))
    # Each re-verification evaluation's role, its round, and when it was asked for.
    placed: dict[int, tuple[str, int, Reverification]] = {}
    for number, round_ in enumerate(rounds, start=1):
        if round_.disputed_evaluation_id is not None:
            placed[round_.disputed_evaluation_id] = ("second", number, round_)
        if round_.evaluation_id is not None and round_.evaluation_id not in placed:
            role = "third" if round_.disputed_evaluation_id is not None else "second"
            placed[round_.evaluation_id] = (role, number, round_)
    # Where each round's timings were compared: its latest evaluation's comparison.
    compared = {round_.pk: Reverification.timing_comparison(by_id.get(round_.evaluation_id))
                for round_ in rounds}

    result = evaluations[-1]
    counts_id = result.pk
    figure = ranked_figure(result)
    if figure is not None and result.pk in placed:
        _, _, round_ = placed[result.pk]
        counts_id = {"first": round_.checked_evaluation_id,
                     "second": round_.disputed_evaluation_id or result.pk}.get(
                         figure["role"], result.pk)

    rows = []
    for evaluation in evaluations:
        role, number, round_ = placed.get(evaluation.pk, (None, 0, None))
        if role is None and evaluation.purpose == Evaluation.Purpose.SUBMISSION:
            role = "first"
        label = EVALUATION_LABELS.get(role, "Re-verification")
        if round_ is not None and (len(rounds) > 1 or round_.reason != round_.Reason.NEW_RECORD):
            label += f" (re-verification {number}, {round_.get_reason_display()})"
        own = Reverification.timing_comparison(evaluation).get(f"{role}_timing") or {
            name: getattr(evaluation, name) for name in Reverification.TIMING_FIELDS}
        if round_ is not None:
            comparisons = [compared[round_.pk]]
            asked = (by_id[round_.disputed_evaluation_id].finished_at
                     if role == "third" and round_.disputed_evaluation_id in by_id
                     else round_.created_at)
        else:  # the first: compared in every round, the same each time
            comparisons = list(compared.values())
            asked = submission.created_at if role == "first" else None
        interval = next((c[role] for c in comparisons if isinstance(c.get(role), dict)), None)
        rows.append({
            "evaluation": evaluation,
            "role": role,
            "label": label,
            "candidate_ms": own.get("candidate_median_ms"),
            "reference_ms": own.get("reference_median_ms"),
            "speedup": own.get("speedup"),
            "interval": interval,
            "compared": next((c.get("compared") for c in comparisons if c.get("compared")),
                             None),
            "set_aside": any(role in (c.get("set_aside") or ()) for c in comparisons),
            "queue_seconds": _seconds(asked, evaluation.started_at),
            "seconds": _seconds(evaluation.started_at, evaluation.finished_at),
            "counts": evaluation.pk == counts_id,
        })
    return rows


def submission_took(submission: Submission, evaluations: list[dict]) -> dict | None:
    """How long the submission took, from being submitted to its settled result (finished, and
    no re-verification pending: Submission.is_settled), with the time its evaluations waited in
    the queue apart from the time they ran (`evaluations`: submission_evaluations). None until
    it is settled, and for a cancelled one.

    {"seconds", "queue_seconds", "evaluating_seconds", "evaluations", "text"}."""
    if submission.status != Submission.Status.FINISHED or not submission.is_settled:
        return None
    if not evaluations:
        return None
    took = _seconds(submission.created_at, evaluations[-1]["evaluation"].finished_at) or 0.0
    count = len(evaluations)
    text = f"took {seconds_label(took)} from submission to settled result"
    # The parts only where every evaluation says when it started (a runner crash's does not).
    queued = running = None
    if all(row["queue_seconds"] is not None and row["seconds"] is not None
           for row in evaluations):
        queued = sum(row["queue_seconds"] for row in evaluations)
        running = sum(row["seconds"] for row in evaluations)
        text += (f": {seconds_label(queued)} waiting in the queue, {seconds_label(running)} "
                 "evaluating" + (f" ({count} evaluations)" if count > 1 else ""))
    return {"seconds": took, "queue_seconds": queued, "evaluating_seconds": running,
            "evaluations": count, "text": text}


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
        "flags": evaluation.exploit_flags,  # exploits; notes apart (evaluator/flags.py)
        "notes": [note["name"] for note in evaluation.notes],
        "error": shown_error(evaluation, details=details),
        # "reverify": a second evaluation with fresh seeds, which replaced the first one.
        "purpose": evaluation.purpose,
        "attempt": evaluation.attempt,
        # Whose figures a re-verified result carries, in words ("" where its own).
        "ranked_figure": (ranked_figure(evaluation) or {}).get("text", ""),
    }


def submission_status_payload(submission: Submission, *, details: bool = False) -> dict:
    """The status as pages poll it and live events carry it. Events go to every viewer, so they
    are built without details; with_details gives a viewer who may see them the full error."""
    evaluation = (
        submission.latest_evaluation if submission.status == Submission.Status.FINISHED else None
    )
    estimate = queue_estimate(submission)
    return {
        "submission": submission.pk,
        "status": submission.status,
        "verdict": submission.verdict or None,
        "queue_position": estimate["position"] if estimate else None,
        # In words, with the estimate (queue_text); empty once it left the queue.
        "queue_text": queue_text(estimate, hardware=submission.hardware.slug) if estimate else "",
        "progress": submission.progress,
        "attempts": submission.attempts,
        "evaluation": evaluation_summary(evaluation, details=details),
        # ranked | pending | held | off_board, with why: changes as a re-verification lands
        # (a cancelled one's says so: the last event of its stream).
        "ranking": submission_ranking(submission)
        if evaluation is not None or submission.status == Submission.Status.CANCELLED else None,
        # Submitted to settled, the queue wait apart (submission_took); None until settled.
        "took": submission_took(submission, submission_evaluations(submission))
        if submission.is_settled and evaluation is not None else None,
    }


def with_details(payload: dict) -> dict:
    """A status payload (a live event's) with its evaluation's full error text, for a viewer
    whom can_see_source allows."""
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
    if filters.get("test_run") is not None:
        submissions = submissions.filter(test_run=filters["test_run"])
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


# ---- ranking state -----------------------------------------------------------------------------


class RankingState(TextChoices):
    """Whether a submission's result ranks on its board (the API's `ranking.state`): ranked;
    pending (no result yet, or a would-be record waiting for its re-verification); held (correct
    and unflagged, but the judge's clock confirmed none of its timings, or held as "timing not
    reproduced" before such results ranked at their slowest timing: a note, never an exploit);
    off_board (it does not count: the `detail` and `reason` say why)."""

    RANKED = "ranked"
    PENDING = "pending"
    HELD = "held"
    OFF_BOARD = "off_board"


class RankingDetail(TextChoices):
    """Why, as a code (the API's `ranking.detail`), each under one RankingState."""

    RANKED = "ranked"
    PENDING_REVERIFICATION = "pending_reverification"
    TIMING_NOT_REPRODUCED = "timing_not_reproduced"
    TIMING_UNCONFIRMED = "timing_unconfirmed"
    FAILED_REVERIFICATION = "failed_reverification"
    FLAGGED = "flagged"
    NOT_CORRECT = "not_correct"
    NOT_TIMED = "not_timed"
    NOT_EVALUATED = "not_evaluated"
    TEST_RUN = "test_run"
    CANCELLED = "cancelled"


RANKING_STATE_OF = {
    RankingDetail.RANKED: RankingState.RANKED,
    RankingDetail.PENDING_REVERIFICATION: RankingState.PENDING,
    RankingDetail.NOT_EVALUATED: RankingState.PENDING,
    RankingDetail.TIMING_NOT_REPRODUCED: RankingState.HELD,
    RankingDetail.TIMING_UNCONFIRMED: RankingState.HELD,
    RankingDetail.FAILED_REVERIFICATION: RankingState.OFF_BOARD,
    RankingDetail.FLAGGED: RankingState.OFF_BOARD,
    RankingDetail.NOT_CORRECT: RankingState.OFF_BOARD,
    RankingDetail.NOT_TIMED: RankingState.OFF_BOARD,
    RankingDetail.TEST_RUN: RankingState.OFF_BOARD,
    RankingDetail.CANCELLED: RankingState.OFF_BOARD,
}

# The details as the submission page names them (the API gives the codes).
RANKING_LABELS = {
    RankingDetail.RANKED: "ranked",
    RankingDetail.PENDING_REVERIFICATION: "pending: re-verification",
    RankingDetail.TIMING_NOT_REPRODUCED: "held: timing not reproduced",
    RankingDetail.TIMING_UNCONFIRMED: "held: timing not confirmed",
    RankingDetail.FAILED_REVERIFICATION: "off the board: re-verification failed",
    RankingDetail.FLAGGED: "off the board: flagged",
    RankingDetail.NOT_CORRECT: "off the board: not correct",
    RankingDetail.NOT_TIMED: "off the board: not timed",
    RankingDetail.NOT_EVALUATED: "pending: not evaluated yet",
    RankingDetail.TEST_RUN: "not ranked: a test run",
    RankingDetail.CANCELLED: "not ranked: cancelled",
}


def _ranking(detail: RankingDetail, reason: str, rank: int | None = None) -> dict:
    return {"state": RANKING_STATE_OF[detail], "detail": detail, "rank": rank, "reason": reason}


def board_rank(row: dict, *, problem_id: int) -> tuple[int | None, int | None]:
    """(rank, None) of a result on its board, or (None, id of the participant's faster
    submission that is on the board in its place).

    A board ranks each participant by their fastest result on it (scoring.on_board) in
    scoring.row_order (by the time it ranks with: capped where a note says so, as the board
    orders its entries); only the results that could be ahead of this one are read: those
    whose some evaluation on the hardware is correct and at most as slow.
    """
    # The problem's submission ids first, as a list, and the hardware checked here (as in
    # latest_evaluations): given a hardware, or the ids as a subquery, SQLite's planner walked
    # every evaluation of the hardware (130 ms at 100,000 submissions; 4 ms this way).
    problem_submissions = list(
        Submission.objects.filter(problem_id=problem_id).order_by().values_list("pk", flat=True)
    )
    faster = Evaluation.objects.filter(
        submission_id__in=problem_submissions,
        correct=True,
        # Its ranking time (capped where a note says so): a result faster than that may be
        # ahead of it; the exact order is board_order's.
        candidate_median_ms__lte=scoring.ranking_ms(row),
    ).order_by().values_list("submission_id", "hardware_id")
    candidates = {pk for pk, hardware_id in faster if hardware_id == row["hardware_id"]}
    mine = scoring.row_participant(row)
    key = scoring.row_order(row)
    ahead: set[str] = set()
    for other in latest_evaluations(submission_ids=candidates, hardware_id=row["hardware_id"]):
        if other["id"] == row["id"] or not scoring.on_board(other):
            continue
        if scoring.row_order(other) < key:
            if scoring.row_participant(other) == mine:
                return None, other["submission_id"]
            ahead.add(scoring.row_participant(other))
    return len(ahead) + 1, None


def submission_ranking(submission: Submission) -> dict:
    """Whether the submission's result ranks and, if not, why: from its latest evaluation on
    its hardware (selectors.latest_evaluations) and the one rule (evaluation/scoring.py)."""
    if submission.status == Submission.Status.CANCELLED:
        return _ranking(RankingDetail.CANCELLED,
                        "Cancelled before its verdict: it has no result, and never ranks.")
    if submission.test_run:
        return _ranking(RankingDetail.TEST_RUN, "A test run: checked for correctness"
                        f"{' and timed' if submission.timed else ''}, never ranked. Submit it "
                        "without `test run` to rank.")
    not_evaluated = _ranking(RankingDetail.NOT_EVALUATED, "It has no result yet.")
    if submission.status != Submission.Status.FINISHED:
        return not_evaluated  # polled while it waits and runs: no query
    rows = latest_evaluations(submission_ids=[submission.pk], hardware_id=submission.hardware_id)
    if not rows:
        return not_evaluated
    row = rows[0]
    board = f"{submission.problem.slug} on {submission.hardware.slug}"
    if scoring.on_board(row):
        rank, faster = board_rank(row, problem_id=submission.problem_id)
        if rank is None:
            reason = f"It ranks, but your faster submission {faster} holds your place on {board}."
        else:
            reason = f"Rank {rank} on {board}."
        if Reverification.TIMING_NOTE in (row["flags"] or []):
            # Ranked at the slowest of evaluations that did not agree: say so, with the figures.
            settled_by = submission.reverifications.filter(
                status=Reverification.Status.PASSED).first()
            if settled_by is not None and settled_by.message:
                reason = f"{reason} {settled_by.message}"
        return _ranking(RankingDetail.RANKED, reason, rank)
    if scoring.pending(row):
        current = submission.reverifications.first()
        if current is not None and current.is_third_round and not current.is_finished:
            return _ranking(
                RankingDetail.PENDING_REVERIFICATION,
                "Its second evaluation's speedup did not agree with the first's, so a third "
                "evaluation with fresh secret seeds decides how fast it is: it ranks on the "
                "slower of two that agree, or on the slowest of the three if no two agree.",
            )
        if current is not None and current.reason == Reverification.Reason.OWNER:
            return _ranking(
                RankingDetail.PENDING_REVERIFICATION,
                "Its owner asked for another re-verification: it is evaluated again with fresh "
                "secret seeds, and ranks on the slower of two evaluations that agree (on the "
                "slowest where no two of three agree).",
            )
        return _ranking(
            RankingDetail.PENDING_REVERIFICATION,
            "It would set a new record, so it is off the board until a second evaluation with "
            "fresh secret seeds on another runner says how fast it is: it ranks on the slower "
            "of the two (a third decides where they disagree).",
        )
    if row["submission__reverification"] == Submission.ReverificationState.FAILED:
        failed = (
            submission.reverifications.filter(status=Reverification.Status.FAILED)
            .select_related("evaluation")
            .first()
        )
        message = failed.message if failed and failed.message else "It did not reproduce."
        if failed is not None and failed.held:
            detail = (RankingDetail.TIMING_UNCONFIRMED if scoring.timing_held(row)
                      else RankingDetail.TIMING_NOT_REPRODUCED)
            return _ranking(detail, f"Held: {message}")
        return _ranking(RankingDetail.FAILED_REVERIFICATION,
                        f"Its re-verification failed: {message}")
    if scoring.timing_held(row):
        return _ranking(
            RankingDetail.TIMING_UNCONFIRMED,
            "Held: the judge's own clock did not confirm the times the kernel's process "
            "reported, in any of its timing attempts (a loaded host, or a report it cannot vouch "
            "for). It is kept off the board as a note, not an exploit; its owner can ask for "
            "another attempt.",
        )
    if scoring.exploits(row):
        flags = ", ".join(scoring.exploits(row))
        return _ranking(RankingDetail.FLAGGED,
                        f"Flagged by the exploit checks ({flags}); flagged results never rank.")
    if not row["correct"]:
        return _ranking(RankingDetail.NOT_CORRECT,
                        f"The verdict is {row['verdict']}; only correct results rank.")
    return _ranking(RankingDetail.NOT_TIMED,
                    "It is correct but was not timed, so it has no time to rank by.")
