"""Entering a competition, its standings, and freezing them at the end.

Scoring: rank points. On each problem the entrants with a result on the board (the scoring rule:
correct, unflagged, timed, and re-verified where it set a record) in a precision the competition
names, or the problem's own where it names none (scoring.counts_in_standings: a bf16 kernel does
not outscore fp32 ones on an fp32 problem unless the competition says so), are ordered by median
time,
ties to the earlier submission; the fastest of n gets n points, the next n-1, down to 1. A
person's score is the sum over the problems; ties go to whoever reached it first (the latest
submission time among the results counted). Whoever entered and has no point yet is listed
without a rank. Each person's row has a cell per problem tried: rank, points, time, attempts.
Rank points, rather than the geometric mean of
speedups over the eager baseline, so that one problem with a huge speedup cannot outweigh
steady work on all of them, and so that standings never depend on a baseline being measured on
the competition's hardware.
"""

from collections import defaultdict
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from competitions.models import Competition, Entry
from evaluation import scoring
from kbsite.live import publish
from submissions.models import Submission
from submissions.selectors import latest_evaluations
from submissions.services import submission_create


class CompetitionError(ValueError):
    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def standings_group(competition_id: int) -> str:
    return f"competition-{competition_id}"


def _day_start(now: datetime) -> datetime:
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def entries_left_today(*, competition: Competition, user, now: datetime | None = None) -> int:
    now = now or timezone.now()
    used = Entry.objects.filter(
        competition=competition, user=user, submitted_at__gte=_day_start(now)
    ).count()
    return max(competition.daily_limit - used, 0)


def competition_submit(
    *,
    competition: Competition,
    user,
    problem,
    source: str,
    backend: str,
    precision: str = "fp32",
    filename: str = "",
) -> Entry:
    """Enter a kernel: checked against the competition's window, problems, backends,
    precisions and daily limit, then submitted like any other on its hardware."""
    now = timezone.now()
    if user is None or not user.is_authenticated:
        raise CompetitionError("Log in to enter a competition.", code="login_required")
    if not competition.published:
        raise CompetitionError("This competition is not open.", code="not_published")
    if competition.phase(now) == Competition.Phase.UPCOMING:
        raise CompetitionError(
            f"This competition opens at {competition.starts_at:%Y-%m-%d %H:%M} UTC.",
            code="not_open_yet",
        )
    if not competition.problems.filter(pk=problem.pk).exists():
        raise CompetitionError(
            f"{problem.slug} is not a problem of this competition.",
            code="problem_not_in_competition",
        )
    if competition.backends and backend not in competition.backends:
        raise CompetitionError(
            f"This competition takes {', '.join(competition.backends)} kernels, not {backend}.",
            code="backend_not_allowed",
        )
    if competition.precisions and precision not in competition.precisions:
        raise CompetitionError(
            f"This competition is judged in {', '.join(competition.precisions)}, not {precision}.",
            code="precision_not_allowed",
        )
    with transaction.atomic():
        # One entry at a time per person, so two at once cannot both pass the daily limit.
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        if entries_left_today(competition=competition, user=user, now=now) <= 0:
            tomorrow = _day_start(now) + timedelta(days=1)
            raise CompetitionError(
                f"You have used today's {competition.daily_limit} entries; the next one is "
                f"possible at {tomorrow:%Y-%m-%d %H:%M} UTC.",
                code="daily_limit",
            )
        submission = submission_create(
            user=user,
            problem=problem,
            source=source,
            backend=backend,
            hardware=competition.hardware,
            precision=precision,
            filename=filename,
        )
        if competition.code_hidden and competition.ends_at > now:
            submission.code_hidden_until = competition.ends_at
            submission.save(update_fields=["code_hidden_until"])
        return Entry.objects.create(
            competition=competition,
            submission=submission,
            user=user,
            problem=problem,
            submitted_at=now,
            after_deadline=now >= competition.ends_at,
        )


def compute_standings(competition: Competition) -> list[dict]:
    """The standings from the on-time entries' results (plain values, ready to keep as JSON)."""
    entries = list(
        Entry.objects.filter(competition=competition, after_deadline=False).select_related(
            "user", "problem"
        )
    )
    by_submission = {entry.submission_id: entry for entry in entries}
    results = latest_evaluations(submission_ids=by_submission, hardware_id=competition.hardware_id)
    # Each person's best result on the board per problem.
    best: dict[tuple[int, int], tuple[dict, Entry]] = {}
    for result in results:
        entry = by_submission[result["submission_id"]]
        if not scoring.counts_in_standings(
            result, problem_precision=entry.problem.precision, precisions=competition.precisions
        ):
            continue
        key = (entry.user_id, entry.problem_id)
        order = scoring.board_order(
            scoring.ranking_ms(result), entry.submitted_at, result["submission_id"]
        )
        current = best.get(key)
        if current is None or order < scoring.board_order(
            scoring.ranking_ms(current[0]), current[1].submitted_at, current[0]["submission_id"]
        ):
            best[key] = (result, entry)

    solvers: dict[int, list[tuple[dict, Entry]]] = defaultdict(list)
    for result, entry in best.values():
        solvers[entry.problem_id].append((result, entry))
    people: dict[int, dict] = {}
    for entry in entries:  # everyone who entered on time is listed, solved or not
        row = people.setdefault(
            entry.user_id,
            {
                "user": entry.user.username,
                "points": 0,
                "solved": 0,
                "problems": {},
                "reached_at": None,
            },
        )
        # Every problem tried has a cell, with its attempts; a ranked result fills in the rest.
        cell = row["problems"].setdefault(
            entry.problem.slug,
            {"rank": None, "points": 0, "median_ms": None, "speedup": None, "attempts": 0},
        )
        cell["attempts"] += 1
    for ranked in solvers.values():
        ranked.sort(
            key=lambda pair: scoring.board_order(
                scoring.ranking_ms(pair[0]), pair[1].submitted_at, pair[0]["submission_id"]
            )
        )
        for place, (result, entry) in enumerate(ranked, start=1):
            points = len(ranked) - place + 1
            row = people[entry.user_id]
            row["points"] += points
            row["solved"] += 1
            row["problems"][entry.problem.slug].update(
                rank=place,
                points=points,
                median_ms=scoring.ranking_ms(result),
                speedup=scoring.speedup(result),
                submission_id=entry.submission_id,
            )
            submitted = entry.submitted_at.isoformat()
            if row["reached_at"] is None or submitted > row["reached_at"]:
                row["reached_at"] = submitted
    rows = sorted(
        people.values(),
        key=lambda r: (-r["points"], -r["solved"], r["reached_at"] or "~", r["user"]),
    )
    for rank, row in enumerate(rows, start=1):
        # Entered but nothing on the board yet: listed, not ranked (no rank to share or beat).
        row["rank"] = rank if row["points"] > 0 else None
        row["key"] = f"standing-{row['user']}"
    return rows


def competition_close(*, competition: Competition) -> None:
    """End it now: later entries are after the deadline, and hidden code shows from now on."""
    with transaction.atomic():
        competition.close_now()
        Submission.objects.filter(
            competition_entry__competition=competition, code_hidden_until__gt=competition.ends_at
        ).update(code_hidden_until=competition.ends_at)
    publish(standings_group(competition.pk), {"type": "standings", "frozen": False})


def _all_on_time_entries_evaluated(competition: Competition) -> bool:
    return not Submission.objects.filter(
        competition_entry__competition=competition,
        competition_entry__after_deadline=False,
        status__in=(Submission.Status.QUEUED, Submission.Status.RUNNING),
    ).exists()


def competition_freeze(*, competition: Competition) -> bool:
    """Keep the standings as they are; only after the end. False when it cannot yet."""
    if competition.is_frozen or competition.phase() != Competition.Phase.ENDED:
        return False
    with transaction.atomic():
        locked = Competition.objects.select_for_update().get(pk=competition.pk)
        if locked.is_frozen:
            return False
        locked.freeze(standings=compute_standings(locked))
    competition.refresh_from_db()
    publish(standings_group(competition.pk), {"type": "standings", "frozen": True})
    return True


def competition_standings(competition: Competition) -> list[dict]:
    """Frozen standings once kept; live ones until then. After the end, the standings freeze
    as soon as every on-time entry has its result."""
    if competition.is_frozen:
        return competition.final_standings
    if competition.phase() == Competition.Phase.ENDED and _all_on_time_entries_evaluated(
        competition
    ):
        competition_freeze(competition=competition)
        return competition.final_standings
    return compute_standings(competition)


def standings_refresh_for(evaluation) -> None:
    """A result landed: if it is an on-time competition entry's, push the new standings."""
    entry = (
        Entry.objects.filter(submission_id=evaluation.submission_id, after_deadline=False)
        .select_related("competition")
        .first()
    )
    if entry is None or entry.competition.is_frozen:
        return
    publish(standings_group(entry.competition_id), {"type": "standings", "frozen": False})
