"""Leaderboard workflows: keeping best entries up to date as results land, and publishing them.

A board is one (problem, hardware, precision): a result ranks on the board of the precision it was
judged in (scoring.board_precision), the problem's own precision being its main board; a bf16
kernel for an fp32 problem ranks, and sets records, on that problem's bf16 board only. A
participant's standing on a board is computed from the latest evaluation of each of its
submissions there, so a re-verification that flags a kernel takes it off the
ranking; a submission held for re-verification (a new record not yet confirmed) or that failed
it does not rank either. Only the changed participant is recomputed when a result lands: the
cost of a refresh grows with that participant's submissions on that problem, never with the
rest of the site. So are the summaries the pages read instead of the entries (the board's
counts, BoardSummary; the participant's row of the people's or the models' table for the
problem's level, ParticipantSummary, from its main boards only), from that board's and that
participant's entries.

Reads, the rows live updates carry included, are in selectors.py, which this module imports.
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from evaluation import metrics, scoring
from kbsite.live import publish
from leaderboard import selectors
from leaderboard.models import BestEntry, BoardSummary, ParticipantSummary, Record, main_boards
from problems.models import Problem
from submissions.models import Evaluation, Submission
from submissions.selectors import latest_evaluations

log = logging.getLogger(__name__)

LEADERBOARD_GROUP = "leaderboard"


def _fastest(evaluations: list[dict]) -> dict | None:
    timed = [e for e in evaluations if e["candidate_median_ms"] is not None]
    pool = timed or evaluations
    if not pool:
        return None
    return min(pool, key=scoring.row_order)


def _entry_fields(latest: list[dict]) -> dict:
    """What a BestEntry holds, from the latest evaluation of each of a participant's submissions."""
    best = _fastest([e for e in latest if scoring.on_board(e)])
    # Only exploits are listed as flagged; notes (flags.py) are facts about honest results.
    flagged = _fastest([e for e in latest if scoring.exploits(e)])
    pending = _fastest([e for e in latest if scoring.pending(e)])
    fields = {
        "evaluation_id": None,
        "submission_id": None,
        "candidate_median_ms": None,
        "reference_median_ms": None,
        "speedup": None,
        "speedup_eager": None,
        "speedup_compile": None,
        "backend": "",
        "achieved_at": None,
        "flagged_evaluation_id": None,
        "flags": [],
        "flagged_ms": None,
        "flagged_at": None,
        "pending_evaluation_id": pending["id"] if pending else None,
        "compiled": any(scoring.compiled(e) for e in latest),
        "evaluated": len(latest),
    }
    if best is not None:
        fields.update(
            evaluation_id=best["id"],
            submission_id=best["submission_id"],
            reference_median_ms=best["reference_median_ms"],
            # As it ranks: a capped result (scoring.standing) no faster than the reference.
            **scoring.standing(best),
            backend=best["submission__backend"],
            achieved_at=best["finished_at"],
        )
    if flagged is not None:
        fields.update(
            flagged_evaluation_id=flagged["id"],
            flags=scoring.exploits(flagged),
            flagged_ms=flagged["candidate_median_ms"],
            flagged_at=flagged["finished_at"],
        )
    return fields


def _participant_filter(participant: str) -> Q:
    """Submissions of one participant (a Q over Submission's fields)."""
    kind, _, ident = participant.partition(":")
    if kind == "model":
        return Q(model_id=int(ident))
    if ident in ("", "None"):
        return Q(model__isnull=True, user__isnull=True)
    return Q(model__isnull=True, user_id=int(ident))


@dataclass
class EntryChange:
    entry: BestEntry | None
    changed: bool  # the ranked or flagged evaluation shown for this participant changed
    record: Record | None


def entry_refresh(
    *, problem_id: int, hardware_id: int, precision: str, participant: str
) -> EntryChange:
    """Recompute one participant's entry on one board (problem, hardware, precision), its
    ranks, and any new record."""
    board = {"problem_id": problem_id, "hardware_id": hardware_id, "precision": precision}
    latest = [
        e
        for e in latest_evaluations(
            # Test runs are never on a board, neither ranked nor flagged nor counted.
            submission_ids=Submission.objects.filter(
                _participant_filter(participant), problem_id=problem_id, test_run=False
            )
            .order_by()
            .values_list("pk", flat=True),
            hardware_id=hardware_id,
        )
        if scoring.board_key(e) == (problem_id, hardware_id, precision)
    ]
    previous = BestEntry.objects.filter(**board, participant=participant).first()
    before = (previous.evaluation_id, previous.flagged_evaluation_id) if previous else (None, None)
    best_before = selectors.board_best_ms(**board)

    # Records set by kernels that no longer rank (flagged on re-verification) are withdrawn.
    not_ranking = [e["submission_id"] for e in latest if not scoring.on_board(e)]
    if not_ranking:
        Record.objects.filter(**board, submission_id__in=not_ranking).delete()

    if not latest:
        if previous:
            previous.delete()
            board_rerank(**board)
            _summary_refresh_for(problem_id=problem_id, hardware_id=hardware_id,
                                 participant=participant)
        return EntryChange(entry=None, changed=previous is not None, record=None)

    fields = _entry_fields(latest)
    first = latest[0]
    entry, _ = BestEntry.objects.update_or_create(
        **board,
        participant=participant,
        defaults={
            **fields,
            "user_id": first["submission__user_id"] if not first["submission__model_id"] else None,
            "model_id": first["submission__model_id"],
            "updated_at": timezone.now(),
        },
    )
    board_rerank(**board)
    entry.refresh_from_db()
    _summary_refresh_for(problem_id=problem_id, hardware_id=hardware_id, participant=participant)

    record = None
    improved = entry.is_ranked and (best_before is None or entry.candidate_median_ms < best_before)
    # One record per submission: a re-verification of a record holder re-measures it, it does
    # not set a second record.
    if improved and not Record.objects.filter(submission_id=entry.submission_id).exists():
        record = Record.objects.create(
            **board,
            participant=participant,
            user_id=entry.user_id,
            model_id=entry.model_id,
            evaluation_id=entry.evaluation_id,
            submission_id=entry.submission_id,
            candidate_median_ms=entry.candidate_median_ms,
            previous_ms=best_before,
            # The result's own (as in boards_rebuild): the board's changes with its entries.
            speedup=fields["speedup"],
            achieved_at=entry.achieved_at,
        )
    changed = before != (entry.evaluation_id, entry.flagged_evaluation_id)
    return EntryChange(entry=entry, changed=changed, record=record)


def _entry_order(entry: BestEntry) -> tuple:
    return scoring.board_order(entry.candidate_median_ms, entry.achieved_at, entry.evaluation_id)


def _number_board(entries: list[BestEntry]) -> list[BestEntry]:
    """Rank a board's entries 1..n in board order (unranked ones get no rank) and give each
    ranked one its speedup against the board's one reference time (scoring.board_speedup).
    Returns the entries whose rank or speedup changed."""
    ranked = sorted((e for e in entries if e.evaluation_id is not None), key=_entry_order)
    new_rank = {id(e): i for i, e in enumerate(ranked, start=1)}
    reference = scoring.board_reference_ms(e.reference_median_ms for e in ranked)
    changed = []
    for entry in entries:
        rank = new_rank.get(id(entry))
        speedup = entry.speedup
        if rank is not None and reference is not None:
            speedup = scoring.board_speedup(reference, entry.candidate_median_ms)
        if (entry.rank, entry.speedup) != (rank, speedup):
            entry.rank, entry.speedup = rank, speedup
            changed.append(entry)
    return changed


def board_rerank(*, problem_id: int, hardware_id: int, precision: str) -> None:
    """Number a board's ranked entries 1..n by median time (unranked entries get no rank), each
    with its speedup against the board's reference time, and count the board (BoardSummary)."""
    board = {"problem_id": problem_id, "hardware_id": hardware_id, "precision": precision}
    entries = list(
        BestEntry.objects.filter(**board).only(
            "id", "rank", "evaluation_id", "candidate_median_ms", "reference_median_ms",
            "speedup", "achieved_at", "evaluated"
        )
    )
    stale = _number_board(entries)
    if stale:
        BestEntry.objects.bulk_update(stale, ["rank", "speedup"])
    if entries:
        BoardSummary.objects.update_or_create(**board, defaults=_board_counts(entries))
    else:
        BoardSummary.objects.filter(**board).delete()


def _board_counts(entries: list[BestEntry]) -> dict:
    """BoardSummary's counts of a board's entries (numbered: _number_board)."""
    return {
        "participants": len(entries),
        "ranked": sum(1 for entry in entries if entry.rank is not None),
        "evaluated": sum(entry.evaluated for entry in entries),
    }


def _board_change_payload(*, problem, hardware, precision: str, change: EntryChange) -> dict:
    """Only the changed participant's rows are sent in full; the others get their new order,
    as [participant, shown rank, tie] (with_noise: a tie shares the rank above it)."""
    board = {"problem": problem, "hardware": hardware, "precision": precision}
    ranked = selectors.board_rows(**board)
    order = [(row["key"], row["shown_rank"], row["tie"]) for row in ranked]
    rows, flagged = [], []
    entry = change.entry
    if entry is not None:
        entry = selectors.board_entries(**board).get(pk=entry.pk)
        if entry.is_ranked:
            rows = [row for row in ranked if row["key"] == entry.participant]
        if entry.flagged_evaluation_id:
            flagged = [selectors.flagged_row(entry)]
    return {
        "type": "board_change",
        "problem": problem.pk,
        "hardware": hardware.slug,
        "precision": precision,
        "order": [[key, rank, tie] if tie else [key, rank] for key, rank, tie in order],
        "flagged_order": selectors.flagged_order(**board),
        "rows": rows,
        "flagged": flagged,
        "changed": [entry.participant] if entry is not None and change.changed else [],
    }


def board_refresh_for(evaluation: Evaluation) -> EntryChange | None:
    """Update the board this evaluation belongs to (its problem, hardware and precision:
    scoring.board_key) and tell open pages what changed.

    Called inside the transaction that stores the evaluation; publish() sends after commit. A
    failure here is logged and leaves the evaluation stored (the savepoint rolls back only the
    board, and `manage.py leaderboard_rebuild` or the participant's next result repairs it).
    """
    submission = evaluation.submission
    problem = submission.problem
    hardware = evaluation.hardware
    _, _, precision = scoring.board_key(selectors.evaluation_row(evaluation))
    try:
        with transaction.atomic():
            change = entry_refresh(
                problem_id=problem.pk, hardware_id=hardware.pk, precision=precision,
                participant=submission.participant,
            )
            publish(
                selectors.board_live_group(
                    problem.pk, hardware.slug, precision, problem_precision=problem.precision
                ),
                _board_change_payload(
                    problem=problem, hardware=hardware, precision=precision, change=change
                ),
            )
            # Every visitor of the global pages gets these: a draft's or a held problem's
            # results are for staff only (Problem.objects.visible_to), so they are left out.
            if problem.status in Problem.LISTED:
                publish(
                    LEADERBOARD_GROUP,
                    _result_payload(
                        problem=problem,
                        hardware=hardware,
                        precision=precision,
                        change=change,
                        participant=submission.participant,
                    ),
                )
    except Exception:
        log.exception("could not refresh the board for evaluation %s", evaluation.pk)
        return None
    return change


def _result_payload(
    *, problem, hardware, precision: str, change: EntryChange, participant: str
) -> dict:
    """For the global, model and user pages: the changed entry, record and model rows. A
    record goes out only from a main board (as the records table lists them:
    selectors.recent_records), and so do the model rows (the tables count main boards only)."""
    main = scoring.is_main_board(precision, problem.precision)
    payload: dict = {
        "type": "result",
        "problem": problem.pk,
        "hardware": hardware.slug,
        "precision": precision,
        "main_board": main,
        "participant_key": participant,
        "entry": None,
        "record": None,
        "model_rows": [],
    }
    if change.entry is not None:
        entry = BestEntry.objects.select_related("problem", "hardware", "user", "model").get(
            pk=change.entry.pk
        )
        payload["entry"] = selectors.entry_row(entry)
    if change.record is not None and main and problem.status != Problem.Status.RETIRED:
        record = Record.objects.select_related("problem", "hardware", "user", "model").get(
            pk=change.record.pk
        )
        payload["record"] = selectors.record_row(record)
    if change.entry is not None and change.entry.model_id and main:
        payload["model_rows"] = selectors.models_table(
            model_id=change.entry.model_id, hardware=hardware
        )
    return payload


# ---- the tables' rows: a summary a participant, hardware and level -----------------------------

# What a summary is counted from: a best entry's, as values_list gives them (summaries_of).
SUMMARY_ENTRY_FIELDS = (
    "participant", "user_id", "model_id", "hardware_id", "problem__level", "problem_id",
    "compiled", "evaluation_id", "speedup", "speedup_eager", "speedup_compile",
)


def summaries_of(entries: Iterable[tuple]) -> dict[tuple[str, int, int], dict]:
    """ParticipantSummary's fields per (participant, hardware, level), counted from best
    entries given as SUMMARY_ENTRY_FIELDS tuples (those on the main boards of published
    problems: the caller filters, summary_entries). Plain values in and out: the migrations
    that added the summaries and the boards' precision fill them with it."""
    outcomes: dict[tuple[str, int, int], dict[str, dict[int, metrics.Outcome]]] = {}
    owners: dict[tuple[str, int, int], tuple[int | None, int | None]] = {}
    for (participant, user_id, model_id, hardware_id, level, problem_id, compiled, evaluation_id,
         *speedups) in entries:
        key = (participant, hardware_id, level)
        owners[key] = (user_id, model_id)
        row = dict(zip(("speedup", "speedup_eager", "speedup_compile"), speedups, strict=True))
        # A best entry holds an evaluation only while one of the participant's results is on
        # the board (scoring.on_board, so verified where a record needed it): that is what
        # correct means in these tables.
        correct = evaluation_id is not None
        for baseline, by_problem in outcomes.setdefault(
            key, {b: {} for b in scoring.BASELINES}
        ).items():
            speedup = scoring.speedup(row, baseline) if correct else None
            by_problem[problem_id] = metrics.Outcome(compiled, correct, speedup)
    summaries = {}
    for key, by_baseline in outcomes.items():
        # In problem order, so that a refresh and a rebuild sum the same logs the same way.
        eager, compile_ = (
            metrics.level_summary(by_baseline[b], problems=sorted(by_baseline[b]))
            for b in ("eager", "compile")
        )
        user_id, model_id = owners[key]
        summaries[key] = {
            "user_id": user_id,
            "model_id": model_id,
            "attempted": eager.attempted,
            "compiled": eager.compiled,
            "correct": eager.correct,
            "fast_eager": {selectors.p_label(p): n for p, n in eager.fast_counts.items()},
            "fast_compile": {selectors.p_label(p): n for p, n in compile_.fast_counts.items()},
            "geomean_eager": eager.geomean_speedup,
            "geomean_compile": compile_.geomean_speedup,
        }
    return summaries


def summary_entries(entries):
    """What the tables count of best entries (a queryset of them, the historical model's in a
    migration): those on the main boards of published problems. A kernel in another precision
    than its problem's ranks on a board of its own and counts in no table: fast_p is the
    problem's, in the problem's precision."""
    return main_boards(entries).filter(problem__status=Problem.Status.PUBLISHED)


def summary_refresh(*, participant: str, hardware_id: int, level: int) -> None:
    """Recount one participant's summary of one level on one hardware from its best entries
    there (a hundred at most: a level's problems); none left on a published problem's main
    board, none kept.
    """
    entries = summary_entries(BestEntry.objects.filter(
        # Through the (user, hardware) or (model, hardware) index, as the participant's own.
        _participant_filter(participant),
        hardware_id=hardware_id,
        problem__level=level,
    )).values_list(*SUMMARY_ENTRY_FIELDS)
    key = {"participant": participant, "hardware_id": hardware_id, "level": level}
    fields = summaries_of(entries).get((participant, hardware_id, level))
    if fields is None:
        ParticipantSummary.objects.filter(**key).delete()
        return
    ParticipantSummary.objects.update_or_create(
        **key, defaults={**fields, "updated_at": timezone.now()}
    )


def _summary_refresh_for(*, problem_id: int, hardware_id: int, participant: str) -> None:
    level = Problem.objects.filter(pk=problem_id).values_list("level", flat=True).first()
    if level is not None:
        summary_refresh(participant=participant, hardware_id=hardware_id, level=level)


def summaries_refresh_for_problem(*, problem: Problem) -> None:
    """A problem's status may have changed (published, held, retired: whether it counts in the
    tables), its level (the admin's form) or its precision (which of its boards is the main
    one, the one the tables count): recount the summaries of everyone with an entry
    on it, of its level and of those they have. A problem with no entry (one just imported) has
    nothing to recount: a query."""
    boards = set(
        BestEntry.objects.filter(problem=problem).values_list("participant", "hardware_id")
    )
    for participant, hardware_id in boards:
        levels = set(
            ParticipantSummary.objects.filter(
                participant=participant, hardware_id=hardware_id
            ).values_list("level", flat=True)
        )
        for level in levels | {problem.level}:
            summary_refresh(participant=participant, hardware_id=hardware_id, level=level)


def summaries_rebuild(*, level: int | None = None) -> int:
    """Recount every participant summary (of one level) from the best entries. Returns how many
    were written."""
    entries = summary_entries(BestEntry.objects.all())
    summaries = ParticipantSummary.objects.all()
    if level is not None:
        entries = entries.filter(problem__level=level)
        summaries = summaries.filter(level=level)
    now = timezone.now()
    rows = [
        ParticipantSummary(
            participant=participant, hardware_id=hardware_id, level=lvl, updated_at=now, **fields
        )
        for (participant, hardware_id, lvl), fields in summaries_of(
            entries.values_list(*SUMMARY_ENTRY_FIELDS).iterator(chunk_size=2000)
        ).items()
    ]
    with transaction.atomic():
        summaries.delete()
        ParticipantSummary.objects.bulk_create(rows, batch_size=2000)
    return len(rows)


# ---- rebuilding from scratch ------------------------------------------------------------------


def boards_rebuild(*, problem: Problem | None = None, batch_size: int = 2000) -> int:
    """Recompute every best entry, rank and record from the evaluations (after an import, or
    if the incremental state is ever in doubt), and the boards' and the participants' summaries
    from them (of the problem's level, given one). Returns the number of entries written."""
    entries_q = BestEntry.objects.all()
    records_q = Record.objects.all()
    boards_q = BoardSummary.objects.all()
    evaluations = Evaluation.objects.all()
    if problem is not None:
        entries_q = entries_q.filter(problem=problem)
        records_q = records_q.filter(problem=problem)
        boards_q = boards_q.filter(problem=problem)
        evaluations = evaluations.filter(submission__problem=problem)
    entries, records, boards = boards_computed(
        board_rows_of(evaluations).iterator(chunk_size=batch_size),
        entry_model=BestEntry, record_model=Record, board_model=BoardSummary,
    )
    with transaction.atomic():
        records_q.delete()
        entries_q.delete()
        boards_q.delete()
        BestEntry.objects.bulk_create(entries, batch_size=batch_size)
        Record.objects.bulk_create(records, batch_size=batch_size)
        BoardSummary.objects.bulk_create(boards, batch_size=batch_size)
        summaries_rebuild(level=problem.level if problem is not None else None)
    return len(entries)


def board_rows_of(evaluations):
    """What the boards are computed from: the evaluations' scoring rows (scoring.ROW_FIELDS),
    test runs left out (never on a board), each submission's newest first (boards_computed
    takes the first row of each submission and hardware). Of the historical Evaluation model
    too, in a migration."""
    return (
        evaluations.filter(submission__test_run=False)
        .order_by("submission_id", "-finished_at", "-id")
        .values(*scoring.ROW_FIELDS)
    )


def boards_computed(rows, *, entry_model, record_model, board_model) -> tuple[list, list, list]:
    """Every best entry, record and board summary that evaluation rows give (board_rows_of's,
    in its order), as unsaved instances of the given models: BestEntry, Record and
    BoardSummary, or the historical ones in a migration (plain values in, so it serves both).
    Each result is on the board of scoring.board_key: one a (problem, hardware, precision)."""
    # Latest evaluation per (submission, hardware), grouped by board and participant.
    groups: dict[tuple[int, int, str, str], list[dict]] = {}
    seen: set[tuple[int, int]] = set()
    for e in rows:
        if (e["submission_id"], e["hardware_id"]) in seen:
            continue
        seen.add((e["submission_id"], e["hardware_id"]))
        groups.setdefault((*scoring.board_key(e), scoring.row_participant(e)), []).append(e)

    now = timezone.now()
    entries = []
    ranking_by_board: dict[tuple[int, int, str], list[dict]] = {}
    for (problem_id, hardware_id, precision, key), latest in groups.items():
        first = latest[0]
        model_id = first["submission__model_id"]
        entries.append(
            entry_model(
                problem_id=problem_id,
                hardware_id=hardware_id,
                precision=precision,
                participant=key,
                user_id=None if model_id else first["submission__user_id"],
                model_id=model_id,
                updated_at=now,
                **_entry_fields(latest),
            )
        )
        ranking_by_board.setdefault((problem_id, hardware_id, precision), []).extend(
            e for e in latest if scoring.on_board(e)
        )

    by_board: dict[tuple[int, int, str], list] = {}
    for entry in entries:
        by_board.setdefault((entry.problem_id, entry.hardware_id, entry.precision), []).append(
            entry
        )
    boards = []
    for (problem_id, hardware_id, precision), board_entries in by_board.items():
        _number_board(board_entries)
        boards.append(board_model(problem_id=problem_id, hardware_id=hardware_id,
                                  precision=precision, **_board_counts(board_entries)))

    records = []
    for (problem_id, hardware_id, precision), ranking in ranking_by_board.items():
        best = None
        for e in sorted(ranking, key=lambda e: (e["finished_at"], e["id"])):
            if best is None or scoring.ranking_ms(e) < best:
                records.append(
                    record_model(
                        problem_id=problem_id,
                        hardware_id=hardware_id,
                        precision=precision,
                        participant=scoring.row_participant(e),
                        user_id=None if e["submission__model_id"] else e["submission__user_id"],
                        model_id=e["submission__model_id"],
                        evaluation_id=e["id"],
                        submission_id=e["submission_id"],
                        candidate_median_ms=scoring.ranking_ms(e),
                        previous_ms=best,
                        speedup=scoring.standing(e)["speedup"],
                        achieved_at=e["finished_at"],
                    )
                )
                best = scoring.ranking_ms(e)
    return entries, records, boards
