"""The leaderboard's reads: boards, the tables of models, runs and people, records, busiest
problems, exports, and the rows live updates carry.

All of them read BestEntry/Record (kept up to date as results land by leaderboard.services)
except the per-run ones, which read only that run's own submissions. A board is one (problem,
hardware, precision): each read of a board takes its precision, the problem's own (its main
board) when none is given, and every row that names a board says which (board_fields). Reads
live here and writes in services.py: services import this module, never the reverse.
"""

import difflib
from collections import defaultdict

from django.conf import settings
from django.db.models import Count, F, Min, Sum
from django.template.loader import render_to_string

from evaluation import metrics, scoring, stats
from evaluation.models import Hardware
from evaluator import verdicts
from kbsite.live import board_group
from leaderboard.models import BestEntry, BoardSummary, ParticipantSummary, Record
from problems.models import Problem
from submissions.models import Evaluation, Submission
from submissions.runs.models import Model
from submissions.runs.selectors import (
    run_first_outcomes,
    run_planned_samples,
    run_problems,
    run_samples,
)
from submissions.selectors import can_see_source, latest_evaluations, shown_error

BASELINES = scoring.BASELINES


def p_label(p: float) -> str:
    return f"{p:g}"


def level_problems(*, levels: set[int] | None = None) -> dict[int, list[int]]:
    """Published problems per level: the denominators of the rates (retired ones left out)."""
    problems = Problem.objects.filter(status=Problem.Status.PUBLISHED)
    if levels is not None:
        problems = problems.filter(level__in=levels)
    by_level: dict[int, list[int]] = defaultdict(list)
    for pk, level in problems.order_by("level", "number").values_list("pk", "level"):
        by_level[level].append(pk)
    return dict(by_level)


def summary_row(summary: metrics.LevelSummary) -> dict:
    return {
        "problems": summary.total,
        "attempted": summary.attempted,
        "compiled": summary.compiled,
        "correct": summary.correct,
        "compile_rate": summary.compile_rate,
        "correct_rate": summary.correct_rate,
        "fast_p": {p_label(p): v for p, v in summary.fast_p.items()},
        "geomean_speedup": summary.geomean_speedup,
    }


def _summaries(summaries, *, baseline: str, level: int | None, fields: tuple[str, ...]):
    """(values, metrics.LevelSummary) for each stored participant summary (ParticipantSummary)
    of a level that has published problems: `fields` of it, its counts over the level's
    published problems and the rates by the chosen baseline. The summaries are counted as
    results land; only the denominators are read here. Plain values, not model instances: a
    table has a row a person (a third of the time went to building instances)."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, not {baseline!r}")
    levels = {level} if level is not None else None
    totals = {lvl: len(pks) for lvl, pks in level_problems(levels=levels).items()}
    if level is not None:
        summaries = summaries.filter(level=level)
    values = summaries.values(
        *fields, "level", "attempted", "compiled", "correct",
        fast=F(f"fast_{baseline}"), geomean=F(f"geomean_{baseline}"),
    )
    rows = []
    for row in values:
        total = totals.get(row["level"])
        if not total:  # no published problem left in its level
            continue
        rows.append((row, metrics.summary_from_counts(
            total=total,
            attempted=row["attempted"],
            compiled=row["compiled"],
            correct=row["correct"],
            fast_counts={p: row["fast"].get(label, 0) for p, label in FAST_P_LABELS},
            geomean_speedup=row["geomean"],
        )))
    return rows


# The fast_p thresholds and their labels (as the summaries' counts are keyed).
FAST_P_LABELS = tuple((p, p_label(p)) for p in metrics.FAST_P_THRESHOLDS)


def models_table(
    *,
    hardware: Hardware | None = None,
    level: int | None = None,
    model_id: int | None = None,
    baseline: str = "eager",
) -> list[dict]:
    """One row per model, hardware and level, over the model's best result on each problem
    (from the models' summaries: a row a model, hardware and level, however many people
    submit)."""
    summaries = ParticipantSummary.objects.filter(model__isnull=False)
    if hardware is not None:
        summaries = summaries.filter(hardware=hardware)
    if model_id is not None:
        summaries = summaries.filter(model_id=model_id)
    found = _summaries(summaries, baseline=baseline, level=level,
                       fields=("model_id", "hardware__slug"))
    models = Model.objects.in_bulk({row["model_id"] for row, _ in found})
    rows = []
    for row, summary in found:
        model, slug = models[row["model_id"]], row["hardware__slug"]
        rows.append(
            {
                "key": f"model-{model.pk}-{slug}-{row['level']}",
                "model_id": model.pk,
                "model": str(model),
                "litellm_name": model.litellm_name,
                "hardware": slug,
                "level": row["level"],
                "baseline": baseline,
                **summary_row(summary),
            }
        )
    rows.sort(key=lambda r: (r["hardware"], r["level"], -r["fast_p"]["1"], r["model"]))
    return rows


def people_table(
    *, hardware: Hardware | None = None, level: int | None = None, baseline: str = "eager"
) -> list[dict]:
    """People ranked per hardware and level over each one's best verified result per problem:
    problems solved first, then how many of them beat the baseline (fast_1), then the geometric
    mean speedup over the solved ones. Numbered 1..n within each hardware and level. Read from
    the people's summaries: a row a person, hardware and level, never their entries."""
    summaries = ParticipantSummary.objects.filter(model__isnull=True, user__isnull=False)
    if hardware is not None:
        summaries = summaries.filter(hardware=hardware)
    rows = []
    for row, summary in _summaries(summaries, baseline=baseline, level=level,
                                   fields=("user_id", "user__username", "hardware__slug")):
        slug = row["hardware__slug"]
        rows.append(
            {
                "key": f"user-{row['user_id']}-{slug}-{row['level']}",
                "user": row["user__username"],
                "hardware": slug,
                "level": row["level"],
                "baseline": baseline,
                "solved": summary.correct,
                "fast_1_count": summary.fast_counts[1.0],
                **summary_row(summary),
            }
        )
    rows.sort(
        key=lambda r: (
            r["hardware"], r["level"], -r["solved"], -r["fast_1_count"],
            -(r["geomean_speedup"] or 0.0), r["user"],
        )
    )
    rank, board = 0, None
    for row in rows:
        rank = rank + 1 if board == (row["hardware"], row["level"]) else 1
        board = (row["hardware"], row["level"])
        row["rank"] = rank
    return rows


def _models():
    """The models, to find their entries through the (model, hardware) index: asked for as
    "model is not null", SQLite walked every entry of the hardware, people's included (twice
    the time with 400 people)."""
    return Model.objects.values("pk")


def model_speedups(
    *, hardware: Hardware, level: int, model_id: int | None = None, baseline: str = "eager"
) -> list[float]:
    """Speedups of the correct best entries of models (for the histogram)."""
    entries = BestEntry.objects.main_boards().filter(
        model_id__in=_models(),
        evaluation__isnull=False,
        hardware=hardware,
        problem_id__in=level_problems(levels={level}).get(level, []),
    )
    if model_id is not None:
        entries = entries.filter(model_id=model_id)
    values = entries.values("speedup", "speedup_eager", "speedup_compile")
    return [s for s in (scoring.speedup(v, baseline) for v in values) if s is not None]


# ---- boards ------------------------------------------------------------------------------------


def board_key_suffix(precision: str, problem_precision: str) -> str:
    """What names of a board (row keys, its live group) add after its hardware's slug: nothing
    for the main board, whose names stay those of before boards had a precision, ".<precision>"
    for another (a period, which no slug has, so no two boards share a name)."""
    return "" if scoring.is_main_board(precision, problem_precision) else f".{precision}"


def board_live_group(
    problem_id: int, hardware_slug: str, precision: str, *, problem_precision: str
) -> str:
    """The channel group of one board's open pages: one a (problem, hardware, precision)."""
    return board_group(problem_id, hardware_slug) + board_key_suffix(precision, problem_precision)


def board_precision(problem, precision: str | None = None) -> str:
    """The precision of the board asked for: the one named, else the problem's own (its main
    board)."""
    return precision or problem.precision


def board_fields(precision: str, problem_precision: str) -> dict:
    """What a row says of its board: its precision, whether it is the problem's main board,
    and its label beside the others ("main board (fp32)", "bf16 board")."""
    return {
        "precision": precision,
        "main_board": scoring.is_main_board(precision, problem_precision),
        "board": scoring.board_label(precision, problem_precision),
    }


def evaluation_row(evaluation: Evaluation) -> dict:
    """The scoring row of one evaluation (scoring.ROW_FIELDS) from the instance and its
    submission, without a query beyond the submission's."""
    submission = evaluation.submission
    row = {field: getattr(evaluation, field) for field in scoring.ROW_FIELDS
           if not field.startswith("submission__")}
    row.update({
        f"submission__{field}": getattr(submission, field)
        for field in (f.removeprefix("submission__") for f in scoring.ROW_FIELDS
                      if f.startswith("submission__"))
    })
    return row


def board_best_ms(problem_id: int, hardware_id: int, precision: str) -> float | None:
    return BestEntry.objects.filter(
        problem_id=problem_id, hardware_id=hardware_id, precision=precision,
        evaluation__isnull=False,
    ).aggregate(best=Min("candidate_median_ms"))["best"]


def would_set_record(evaluation: Evaluation) -> bool:
    """Whether this evaluation would beat the best ranked time on its board (or be the first):
    the board of its precision (scoring.board_key), not its problem's main board alone."""
    if not evaluation.ranks:
        return False
    row = evaluation_row(evaluation)
    problem_id, hardware_id, precision = scoring.board_key(row)
    best = board_best_ms(problem_id, hardware_id, precision)
    return best is None or scoring.ranking_ms(row) < best


def board_reference(
    *, problem_id: int, hardware_id: int, precision: str | None = None
) -> float | None:
    """The reference time a board's speedups are against (scoring.board_reference_ms); its
    problem's main board unless a precision is named."""
    if precision is None:
        precision = Problem.objects.values_list("precision", flat=True).get(pk=problem_id)
    return scoring.board_reference_ms(
        BestEntry.objects.filter(
            problem_id=problem_id, hardware_id=hardware_id, precision=precision,
            rank__isnull=False,
        ).values_list("reference_median_ms", flat=True)
    )


def board_entries(*, problem, hardware, precision: str | None = None):
    return BestEntry.objects.filter(
        problem=problem, hardware=hardware, precision=board_precision(problem, precision)
    ).select_related("user", "model")


def problem_boards(*, problem, hardware) -> list[dict]:
    """The boards of a problem on a hardware, the main one first (listed even while empty),
    then the other precisions someone has entered, each with board_fields and its counts."""
    counts = dict(
        BoardSummary.objects.filter(problem=problem, hardware=hardware).values_list(
            "precision", "ranked"
        )
    )
    precisions = [problem.precision] + sorted(p for p in counts if p != problem.precision)
    return [
        {**board_fields(p, problem.precision), "ranked": counts.get(p, 0)} for p in precisions
    ]


def entry_participant_label(entry: BestEntry) -> str:
    if entry.model_id:
        return str(entry.model)
    return entry.user.username if entry.user_id else "anonymous"


def participant_fields(entry) -> dict:
    """Who, as data: the templates make the links (rows are built where no URLs are loaded)."""
    return {
        "participant": entry_participant_label(entry),
        "participant_key": entry.participant,
        "model_id": entry.model_id,
        "username": entry.user.username if entry.user_id and not entry.model_id else None,
    }


def board_row(entry: BestEntry) -> dict:
    return {
        "key": entry.participant,
        "rank": entry.rank,
        **participant_fields(entry),
        "submission_id": entry.submission_id,
        "evaluation_id": entry.evaluation_id,
        "candidate_ms": entry.candidate_median_ms,
        "reference_ms": entry.reference_median_ms,
        "speedup": entry.speedup,
        "speedup_eager": entry.speedup_eager,
        "speedup_compile": entry.speedup_compile,
        "backend": entry.backend,
        "precision": entry.precision,
        "date": entry.achieved_at.isoformat() if entry.achieved_at else None,
    }


def flagged_row(entry: BestEntry) -> dict:
    return {
        "key": entry.participant,
        **participant_fields(entry),
        "evaluation_id": entry.flagged_evaluation_id,
        "candidate_ms": entry.flagged_ms,
        "flags": entry.flags,
        "date": entry.flagged_at.isoformat() if entry.flagged_at else None,
    }


def board_rows(*, problem, hardware, precision: str | None = None) -> list[dict]:
    """The ranking of a board (its problem's main board unless a precision is named): best
    correct, unflagged evaluation per participant, fastest first, with the noise shown
    (with_noise)."""
    entries = board_entries(problem=problem, hardware=hardware, precision=precision).filter(
        rank__isnull=False
    )
    return with_noise([board_row(e) for e in entries.order_by("rank")])


# What the problems list shows of the boards (through leaderboard_tags: problems imports no
# leaderboard module).
def problem_solvers(*, problem_ids) -> dict[int, int]:
    """Per problem: how many people (not models) have a kernel ranked on one of its main
    boards (in its own precision)."""
    rows = (
        BestEntry.objects.main_boards().filter(
            problem_id__in=problem_ids, rank__isnull=False, user_id__isnull=False
        )
        .values("problem_id")
        .annotate(people=Count("user_id", distinct=True))
    )
    return {row["problem_id"]: row["people"] for row in rows}


def problem_status_for(*, user, problem_ids) -> dict[int, str]:
    """Per problem, this user's status: "solved" (a kernel ranked on one of its main boards,
    in its own precision), "tried" (a submission, none ranked there); problems not tried are
    left out."""
    if user is None or not user.is_authenticated:
        return {}
    tried = (
        Submission.objects.filter(user=user, problem_id__in=problem_ids)
        .values_list("problem_id", flat=True)
        .distinct()
    )
    solved = BestEntry.objects.main_boards().filter(
        problem_id__in=problem_ids, rank__isnull=False, user=user
    ).values_list("problem_id", flat=True)
    return {**dict.fromkeys(tried, "tried"), **dict.fromkeys(solved, "solved")}


def with_noise(rows: list[dict]) -> list[dict]:
    """Ranked rows, in board order, with each time's 95% confidence interval from its timing
    samples (evaluation/stats.py, at least settings.TIMING_INTERVAL_FLOOR each side) and ties:
    a row whose interval overlaps the one above it is `tie` and shares its `shown_rank`.
    `rank` stays the strict order (scoring.board_order: the earlier result first on a tie).
    One query for the rows' timing summaries."""
    ids = [row["evaluation_id"] for row in rows if row.get("evaluation_id")]
    summaries = dict(Evaluation.objects.filter(pk__in=ids).values_list("pk", "candidate_stats"))
    intervals = [
        stats.median_interval(
            summaries.get(row.get("evaluation_id")), median_ms=row["candidate_ms"],
            floor=settings.TIMING_INTERVAL_FLOOR,
        )
        for row in rows
    ]
    tied = stats.ties(intervals)
    shown = stats.shown_ranks([row["rank"] for row in rows], tied)
    for row, interval, tie, shown_rank in zip(rows, intervals, tied, shown, strict=True):
        row.update(
            shown_rank=shown_rank,
            tie=tie,
            interval_ms=interval.half_width if interval else None,
            low_ms=interval.low if interval else None,
            high_ms=interval.high if interval else None,
        )
    return rows


def flagged_rows(*, problem, hardware, precision: str | None = None) -> list[dict]:
    entries = (
        board_entries(problem=problem, hardware=hardware, precision=precision)
        .filter(flagged_evaluation__isnull=False)
        .order_by("flagged_ms", "flagged_at")
    )
    return [flagged_row(e) for e in entries]


def flagged_order(*, problem, hardware, precision: str | None = None) -> list[str]:
    """The participants of a board's flagged rows, in the order the page lists them."""
    return list(
        BestEntry.objects.filter(
            problem=problem, hardware=hardware, precision=board_precision(problem, precision),
            flagged_evaluation__isnull=False,
        )
        .order_by("flagged_ms", "flagged_at")
        .values_list("participant", flat=True)
    )


def record_rows(*, problem, hardware, precision: str | None = None) -> list[dict]:
    records = Record.objects.filter(
        problem=problem, hardware=hardware, precision=board_precision(problem, precision)
    ).select_related("user", "model", "problem", "hardware")
    return [record_row(r) for r in records.order_by("achieved_at", "id")]


def record_row(record: Record) -> dict:
    return {
        "key": f"record-{record.pk}",
        "problem": record.problem.slug,
        "level": record.problem.level,
        "number": record.problem.number,
        "hardware": record.hardware.slug,
        **board_fields(record.precision, record.problem.precision),
        **participant_fields(record),
        "submission_id": record.submission_id,
        "candidate_ms": record.candidate_median_ms,
        "previous_ms": record.previous_ms,
        "speedup": record.speedup,
        "date": record.achieved_at.isoformat(),
    }


ROW_TEMPLATES = {
    "rows": "leaderboard/_board_row.html",
    "flagged": "leaderboard/_flagged_row.html",
    "entry": "leaderboard/_entry_row.html",
    "record": "leaderboard/_record_row.html",
    "model_rows": "leaderboard/_model_row.html",
}


def with_html(payload: dict) -> dict:
    """The payload with each row rendered by the template the page itself uses.

    Done in the web process as a message goes out (template rendering touches no database), so
    the runner publishes plain data and pages get rows they can swap in as they are.
    """
    rendered = dict(payload)
    for field, template in ROW_TEMPLATES.items():
        value = payload.get(field)
        if isinstance(value, list):
            rendered[field] = [_render_row(row, template) for row in value]
        elif isinstance(value, dict):
            rendered[field] = _render_row(value, template)
    return rendered


def _render_row(row: dict, template: str) -> dict:
    return {**row, "html": render_to_string(template, {"r": row}).strip()}


def board_snapshot(*, problem, hardware, precision: str | None = None) -> dict:
    """Everything an open board page needs."""
    board = {"problem": problem, "hardware": hardware,
             "precision": board_precision(problem, precision)}
    return {
        "type": "board",
        "problem": problem.pk,
        "hardware": hardware.slug,
        "precision": board["precision"],
        "rows": board_rows(**board),
        "flagged": flagged_rows(**board),
    }


# ---- runs -------------------------------------------------------------------------------------


def run_summary(run, *, baseline: str = "eager") -> list[dict]:
    """Per level: rates and fast_p over sample 0 of each problem (KernelBench's convention for
    a run), and pass@k over all samples where the run has several. From the run's samples as
    they are kept (runs.run_samples: a row a sample, counted as its results land)."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, not {baseline!r}")
    samples = run_samples(run)
    planned = run_planned_samples(run)
    counts: dict[int, tuple[int, int]] = {}
    for (problem_id, _), sample in samples.items():
        n, c = counts.get(problem_id, (0, 0))
        counts[problem_id] = (n + 1, c + int(sample["correct"]))
    first = run_first_outcomes(samples, baseline=baseline)
    # KernelBench's counting beside ours (scoring.COUNTINGS), labelled.
    first_kb = run_first_outcomes(samples, baseline=baseline, counting="kernelbench")
    rows = []
    for level, problems in sorted(run_problems(run).items()):
        summary = metrics.level_summary(first, problems=problems)
        kb = summary_row(metrics.level_summary(first_kb, problems=problems))
        rows.append(
            {
                "key": f"run-{run.pk}-{level}",
                "run_id": run.pk,
                "run": run.name,
                "model": str(run.model),
                "hardware": run.hardware.slug,
                "level": level,
                "baseline": baseline,
                "samples_per_problem": planned,
                "evaluated_samples": sum(counts.get(p, (0, 0))[0] for p in problems),
                **summary_row(summary),
                "counting": scoring.COUNTING_LABELS["strict"],
                "kernelbench": {
                    "counting": scoring.COUNTING_LABELS["kernelbench"],
                    **{k: kb[k] for k in ("correct", "correct_rate", "fast_p",
                                          "geomean_speedup")},
                },
                "pass_at_k": {
                    f"pass@{k}": metrics.mean_pass_at_k(
                        counts, problems=problems, samples=planned, k=k
                    )
                    # The usual ks, and k = all samples ("did any sample pass").
                    for k in sorted({k for k in metrics.PASS_AT_K if k <= planned} | {planned})
                },
            }
        )
    return rows


def _kernelbench_stats(stats: dict | None, hardware: Hardware) -> dict:
    if not stats:
        return {}
    return {
        "mean": stats.get("mean_ms"),
        "median": stats.get("median_ms"),
        "std": stats.get("std_ms"),
        "min": stats.get("min_ms"),
        "max": stats.get("max_ms"),
        "num_trials": stats.get("n"),
        "hardware": hardware.name or hardware.slug,
        "device": hardware.slug,
    }


def run_eval_results(run, *, level: int | None = None, viewer=None) -> dict:
    """The run in KernelBench's eval_results.json layout: {problem number: [one entry per
    sample: sample_id, compiled, correctness, metadata, runtime, runtime_stats]}.

    KernelBench keys problems by their number within one level, so a run over several levels
    must name the level it wants.
    """
    levels = sorted(run_problems(run))
    if level is None:
        if len(levels) > 1:
            raise ValueError(
                f"this run covers levels {', '.join(map(str, levels))}; choose one with ?level="
            )
        level = levels[0] if levels else None
    elif level not in levels:
        raise ValueError(f"this run has no problems in level {level}")
    # Each sample's result, as the tables count it (runs.run_samples).
    chosen = {key: e for key, e in run_samples(run).items() if e["evaluation_id"] is not None}
    evaluations = Evaluation.objects.select_related("submission__problem").in_bulk(
        [e["evaluation_id"] for e in chosen.values()]
    )
    problems = Problem.objects.in_bulk({problem_id for problem_id, _ in chosen})
    hardware = run.hardware
    results: dict[str, list[dict]] = {}
    for (problem_id, index), e in sorted(chosen.items(), key=lambda item: item[0][1]):
        problem = problems[problem_id]
        if problem.level != level:
            continue
        evaluation = evaluations[e["evaluation_id"]]
        correct = e["correct"]
        stats = _kernelbench_stats(evaluation.candidate_stats, hardware) if correct else {}
        passed = sum(1 for t in evaluation.trials if isinstance(t, dict) and t.get("passed"))
        metadata = {
            "hardware": hardware.name or hardware.slug,
            "device": hardware.slug,
            "problem": problem.slug,
            "submission_id": evaluation.submission_id,
            "evaluation_id": evaluation.pk,
            "verdict": evaluation.verdict,
            "correctness_trials": f"({passed} / {len(evaluation.trials)})",
            "reference_runtime_stats": _kernelbench_stats(evaluation.reference_stats, hardware),
            "speedup": evaluation.speedup,
            "speedup_compile": evaluation.speedup_compile,
        }
        if evaluation.flags:
            metadata["flags"] = list(evaluation.flags)
        # The error text for the submitter and staff; others get the verdict's generic one.
        error = shown_error(evaluation, details=can_see_source(evaluation.submission, viewer))
        if error:
            known = verdicts.BY_NAME.get(evaluation.verdict)
            metadata[known.kernelbench_key if known else "other_error"] = error
        results.setdefault(str(problem.number), []).append(
            {
                "sample_id": index,
                "compiled": e["compiled"],
                "correctness": correct,
                "metadata": metadata,
                # KernelBench reports the mean time in ms, and -1.0 when there is none.
                "runtime": stats.get("mean") if stats.get("mean") is not None else -1.0,
                "runtime_stats": stats,
            }
        )
    return dict(sorted(results.items(), key=lambda item: int(item[0])))


# ---- pages: users, models, records, busiest problems -----------------------------------------


def entry_row(entry: BestEntry) -> dict:
    """A participant's standing on one board, for the user and model pages."""
    board = f"{entry.hardware.slug}{board_key_suffix(entry.precision, entry.problem.precision)}"
    return {
        "key": f"entry-{entry.problem_id}-{board}-{entry.participant}",
        **participant_fields(entry),
        "problem": entry.problem.slug,
        "level": entry.problem.level,
        "number": entry.problem.number,
        "retired": entry.problem.status == Problem.Status.RETIRED,
        "hardware": entry.hardware.slug,
        **board_fields(entry.precision, entry.problem.precision),
        "rank": entry.rank,
        "candidate_ms": entry.candidate_median_ms,
        "speedup": entry.speedup,
        "speedup_eager": entry.speedup_eager,
        "speedup_compile": entry.speedup_compile,
        "backend": entry.backend,
        "submission_id": entry.submission_id,
        "evaluated": entry.evaluated,
        "compiled": entry.compiled,
        "flags": entry.flags,
        "date": entry.achieved_at.isoformat() if entry.achieved_at else None,
    }


# What entry_row reads of an entry and its relations: the problems' texts, the people's and the
# models' other columns are most of a row's width, for a few hundred rows a page.
ENTRY_ROW_FIELDS = (
    "problem__slug", "problem__level", "problem__number", "problem__status",
    "problem__precision", "hardware__slug", "precision", "participant", "user__username",
    "model__display_name", "model__litellm_name", "rank",
    "candidate_median_ms", "speedup", "speedup_eager", "speedup_compile", "backend",
    "submission_id", "evaluated", "compiled", "flags", "achieved_at",
)


def participant_entries(*, user=None, model=None) -> list[dict]:
    # Drafts' and held problems' boards are for staff only: never on these public pages.
    entries = (
        BestEntry.objects.filter(problem__status__in=Problem.LISTED)
        .select_related("problem", "hardware", "user", "model")
        .only(*ENTRY_ROW_FIELDS)
    )
    if model is not None:
        entries = entries.filter(model=model)
    else:
        entries = entries.filter(user=user, model__isnull=True)
    entries = entries.order_by("problem__level", "problem__number", "hardware__slug", "precision")
    return [entry_row(e) for e in entries]


def recent_records(
    *, limit: int = 20, hardware: Hardware | None = None, precision: str | None = None
) -> list[dict]:
    """The newest records on the main boards (each problem's own precision), or, given a
    precision, on the boards of that precision (a bf16 problem's main board among them)."""
    records = Record.objects.filter(problem__status__in=Problem.OPEN).select_related(
        "problem", "hardware", "user", "model"
    )
    records = records.main_boards() if precision is None else records.filter(precision=precision)
    if hardware is not None:
        records = records.filter(hardware=hardware)
    return [record_row(r) for r in records.order_by("-achieved_at", "-id")[:limit]]


def busiest_problems(*, limit: int = 10) -> list[dict]:
    """Active problems with the most evaluated submissions, counted from the boards' summaries
    (BoardSummary: a row a board, never the entries or the submissions)."""
    active = Problem.objects.filter(status__in=Problem.OPEN).values("pk")
    rows = list(
        BoardSummary.objects.filter(problem_id__in=active)
        .values("problem_id")
        .annotate(
            submissions=Sum("evaluated"), participants=Sum("participants"), ranked=Sum("ranked")
        )
        .order_by("-submissions", "problem_id")[:limit]
    )
    problems = Problem.objects.in_bulk([r["problem_id"] for r in rows])
    return [
        {
            "key": f"problem-{r['problem_id']}",
            "problem": problems[r["problem_id"]].slug,
            "level": problems[r["problem_id"]].level,
            "number": problems[r["problem_id"]].number,
            "submissions": r["submissions"],
            "participants": r["participants"],
            "ranked": r["ranked"],
        }
        for r in rows
    ]


def board_index(*, hardware=None, level: int | None = None) -> list[dict]:
    """Every board (problem x hardware x precision) with a participant, by level and problem,
    the main board first: its participants and ranked kernels. Boards of listed problems only
    (published, and retired ones for the record): what a visitor can open."""
    listed = Problem.objects.filter(status__in=Problem.LISTED)
    if level is not None:
        listed = listed.filter(level=level)
    # Counted as the boards' entries change (BoardSummary): a row a board here. Counting the
    # entries themselves was 10 ms of the index's 70 at 38,000 entries.
    counts = BoardSummary.objects.filter(problem_id__in=listed.values("pk")).values(
        "problem_id", "hardware_id", "precision", "participants", "ranked"
    )
    if hardware is not None:
        counts = counts.filter(hardware=hardware)
    problems = listed.only("slug", "level", "number", "status", "precision").in_bulk()
    slugs = dict(Hardware.objects.values_list("pk", "slug"))
    rows = [
        {
            "key": f"board-{r['problem_id']}-{slugs[r['hardware_id']]}"
                   f"{board_key_suffix(r['precision'], problems[r['problem_id']].precision)}",
            "problem": problems[r["problem_id"]].slug,
            "level": problems[r["problem_id"]].level,
            "number": problems[r["problem_id"]].number,
            "hardware": slugs[r["hardware_id"]],
            **board_fields(r["precision"], problems[r["problem_id"]].precision),
            "retired": problems[r["problem_id"]].status == Problem.Status.RETIRED,
            "participants": r["participants"],
            "ranked": r["ranked"],
        }
        for r in counts
    ]
    rows.sort(key=lambda r: (r["level"], r["number"], r["hardware"], not r["main_board"],
                             r["precision"]))
    return rows


# ---- comparing two submissions -----------------------------------------------------------------


def compare_side(submission, *, viewer) -> dict:
    """One submission as the compare page shows it: its result (the latest evaluation on its
    hardware, read through the scoring rule), its timings and phases, and its code only for
    whoever may see it."""
    [result] = latest_evaluations(
        submission_ids=[submission.pk], hardware_id=submission.hardware_id
    ) or [None]
    evaluation = Evaluation.objects.filter(pk=result["id"]).first() if result else None
    return {
        "submission": submission,
        "participant": str(submission.model) if submission.model_id else (
            submission.user.username if submission.user_id else "anonymous"
        ),
        "evaluation": evaluation,
        "on_board": scoring.on_board(result) if result else False,
        "held": scoring.held(result) if result else False,
        "speedup": scoring.speedup(result) if result else None,
        "error": shown_error(evaluation, details=can_see_source(submission, viewer)),
        "code_visible": can_see_source(submission, viewer),
    }


def code_diff(a: str, b: str, *, a_name: str, b_name: str) -> list[tuple[str, str]]:
    """A unified diff of two sources as (kind, line) pairs, kind one of "head", "hunk", "add",
    "del", "same" (the template marks each)."""
    lines = difflib.unified_diff(
        a.splitlines(), b.splitlines(), fromfile=a_name, tofile=b_name, lineterm="", n=3
    )
    diff = []
    for line in lines:
        if line.startswith(("---", "+++")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        diff.append((kind, line))
    return diff


def default_hardware() -> Hardware | None:
    """The hardware a board shows before anyone chooses: the only one, else the one with the
    most evaluated submissions on its boards (ties to the first registered), else none (no
    hardware at all)."""
    # From the boards' summaries (a row a board): counting the evaluations themselves read
    # every one of them on each visit of the tables' pages (8 ms at 100,000).
    counts = dict(
        BoardSummary.objects.order_by()
        .values("hardware_id")
        .annotate(n=Sum("evaluated"))
        .values_list("hardware_id", "n")
    )
    return min(
        Hardware.objects.order_by("pk"), key=lambda h: -counts.get(h.pk, 0), default=None
    )
