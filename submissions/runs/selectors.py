"""Reading model runs, for the run pages, the API and the boards: a run's progress, its samples'
results as the tables count them (kept in RunSample by samples.py), its problems, fast_p.

Reads only: services.py writes, and may import these; never the reverse.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.core.paginator import Page, Paginator
from django.db.models import Count, Max, Q, Sum

from evaluation import metrics, scoring
from problems.models import Problem
from submissions.models import Submission
from submissions.runs.models import Generation, Run
from submissions.selectors import latest_evaluations

# A step that is over: it is never asked again.
FINISHED_STEPS = (Generation.Status.DONE, Generation.Status.NO_CODE, Generation.Status.FAILED)

# The run page lists the steps of this many of the run's problems at a time.
STEP_PROBLEMS_PER_PAGE = 10


def run_progress(run: Run, *, correct: int | None = None) -> dict:
    """Counts for the run page: steps generated, submissions evaluated, and correct (their
    result on the board: scoring.on_board, as every table counts it; `correct` when the
    caller has counted them)."""
    # order_by(): Generation's default order joined every step to its run only to count them.
    steps = dict(run.generations.order_by().values_list("status").annotate(n=Count("id")))
    submissions = run.submissions.aggregate(
        total=Count("id"),
        evaluated=Count("id", filter=Q(status=Submission.Status.FINISHED)),
    )
    if correct is None:
        correct = run.sample_results.aggregate(n=Sum("correct_submissions"))["n"] or 0
    problems = run.problems.count()
    return {
        "status": run.status,
        "problems": problems,
        "planned_steps": problems * run.samples_per_problem * (1 + run.refinement_turns),
        "pending": steps.get(Generation.Status.PENDING, 0),
        "generated": sum(steps.get(s, 0) for s in FINISHED_STEPS),
        "done": steps.get(Generation.Status.DONE, 0),
        "no_code": steps.get(Generation.Status.NO_CODE, 0),
        "failed": steps.get(Generation.Status.FAILED, 0),
        "submissions": submissions["total"],
        "evaluated": submissions["evaluated"],
        "correct": correct,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "cost_usd": run.cost_usd,
    }


# What the tables read of a sample.
SAMPLE_FIELDS = (
    "problem_id", "sample_index", "evaluation_id", "compiled", "correct", "speedup_eager",
    "speedup_compile", "kernelbench_correct", "kernelbench_speedup_eager",
    "kernelbench_speedup_compile", "correct_submissions",
)


def run_samples(run: Run) -> dict[tuple[int, int], dict]:
    """Per (problem, sample index), each sample that has a result: that result as the tables
    count it (RunSample's SAMPLE_FIELDS), kept as the run's results land."""
    return {
        (row["problem_id"], row["sample_index"]): row
        for row in run.sample_results.values(*SAMPLE_FIELDS)
    }


def run_planned_samples(run: Run) -> int:
    """How many samples a problem of the run has, planned or made (pass@k's n)."""
    highest = run.submissions.aggregate(highest=Max("sample_index"))["highest"]
    return max(run.samples_per_problem, highest + 1 if highest is not None else 0)


def run_problems(run: Run) -> dict[int, list[int]]:
    """The run's problems per level: the denominators of its rates. A run without a list
    counts every published problem of the levels it submitted to."""
    chosen = list(run.problems.order_by("level", "number").values_list("pk", "level"))
    by_level: dict[int, list[int]] = defaultdict(list)
    if chosen:
        for pk, level in chosen:
            by_level[level].append(pk)
        return dict(by_level)
    levels = set(run.submissions.values_list("problem__level", flat=True).distinct())
    published = Problem.objects.filter(status=Problem.Status.PUBLISHED, level__in=levels)
    for pk, level in published.order_by("level", "number").values_list("pk", "level"):
        by_level[level].append(pk)
    return dict(by_level)


def run_first_outcomes(
    samples: dict[tuple[int, int], dict], *, baseline: str = "eager", counting: str = "strict",
) -> dict[int, metrics.Outcome]:
    """Per problem, sample 0's outcome (run_samples): KernelBench scores a run by its first
    sample. `counting` (scoring.COUNTINGS): ours (strict), or KernelBench's, where a kernel
    whose own backend did not do the work still counts as correct."""
    for name, value, allowed in (("counting", counting, scoring.COUNTINGS),
                                 ("baseline", baseline, scoring.BASELINES)):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    prefix = "kernelbench_" if counting == "kernelbench" else ""
    return {
        problem_id: metrics.Outcome(
            compiled=sample["compiled"],
            correct=sample[f"{prefix}correct"],
            speedup=sample[f"{prefix}speedup_{baseline}"],
        )
        for (problem_id, index), sample in samples.items()
        if index == 0
    }


@dataclass
class FastPRow:
    level: int
    problems: int
    correct: int
    fast_p: dict[float, float] = field(default_factory=dict)
    geomean_speedup: float | None = None


def run_fast_p(
    run: Run,
    *,
    counting: str = "strict",
    samples: dict[tuple[int, int], dict] | None = None,
) -> list[FastPRow]:
    """fast_p per level over the run's problems (every one in the denominator), over the eager
    baseline: the same figures as the leaderboard's run table. `counting`: scoring.COUNTINGS;
    `samples`: run_samples, when the caller has read them."""
    if samples is None:
        samples = run_samples(run)
    first = run_first_outcomes(samples, counting=counting)
    rows = []
    for level, problem_ids in sorted(run_problems(run).items()):
        summary = metrics.level_summary(first, problems=problem_ids)
        rows.append(
            FastPRow(
                level=level,
                problems=summary.total,
                correct=summary.correct,
                fast_p=dict(summary.fast_p),
                geomean_speedup=summary.geomean_speedup,
            )
        )
    return rows


def fast_p_label(p: float) -> str:
    return f"fast_{p:g}"


def _fast_p_rows(rows: list[FastPRow]) -> list[dict]:
    return [
        {
            "level": row.level,
            "problems": row.problems,
            "correct": row.correct,
            "geomean_speedup": row.geomean_speedup,
            **{fast_p_label(p): value for p, value in row.fast_p.items()},
        }
        for row in rows
    ]


def _run_tables(run: Run) -> dict:
    """What the run page shows from every sample's result: the correct ones and both fast_p
    tables, from one read of the samples."""
    samples = run_samples(run)
    return {
        "correct": sum(sample["correct_submissions"] for sample in samples.values()),
        "fast_p": _fast_p_rows(run_fast_p(run, samples=samples)),
        # KernelBench's own counting beside ours (scoring.COUNTING_LABELS says what each is).
        "fast_p_kernelbench": _fast_p_rows(
            run_fast_p(run, counting="kernelbench", samples=samples)
        ),
    }


def _problem_steps(run: Run, problems: Page) -> list[dict]:
    """The steps of these problems of the run, each with its submission's result."""
    generations = list(
        run.generations.filter(problem_id__in=[problem.pk for problem in problems])
        .select_related("submission")
        # The prompt, the answer and the kernel are kilobytes a step, and not shown here
        # (run_id stays: the related manager reads it to attach each step to the run).
        .only(
            "run_id", "problem_id", "sample_index", "turn", "status", "error", "submission_id",
            "submission__status", "submission__verdict",
        )
        .order_by("sample_index", "turn")
    )
    evaluations = {
        e["submission_id"]: e
        for e in latest_evaluations(
            submission_ids=[g.submission_id for g in generations if g.submission_id],
            hardware_id=run.hardware_id,
        )
    }
    steps: dict[int, list[dict]] = defaultdict(list)
    for g in generations:
        submission = g.submission
        evaluation = evaluations.get(g.submission_id) if g.submission_id else None
        steps[g.problem_id].append(
            {
                "sample": g.sample_index,
                "turn": g.turn,
                "status": g.status,
                "error": g.error[:300],
                "submission": g.submission_id,
                "submission_url": submission.get_absolute_url() if submission else None,
                "submission_status": submission.status if submission else None,
                "verdict": (submission.verdict or None) if submission else None,
                "counted": scoring.on_board(evaluation) if evaluation else None,
                "speedup": scoring.speedup(evaluation) if evaluation else None,
            }
        )
    return [
        {
            "id": problem.pk,
            "slug": problem.slug,
            "url": problem.get_absolute_url(),
            "steps": steps.get(problem.pk, []),
        }
        for problem in problems
    ]


def run_status_payload(run: Run, *, page: int | str | None = 1) -> dict:
    """Everything the run page shows, as JSON: the page polls it for live progress. The steps
    are those of one page of the run's problems (STEP_PROBLEMS_PER_PAGE a page)."""
    tables = _run_tables(run)
    problems = Paginator(
        run.problems.order_by("level", "number").only("slug", "level", "number"),
        STEP_PROBLEMS_PER_PAGE,
    ).get_page(page)
    return {
        "run": run.pk,
        **run_progress(run, correct=tables["correct"]),
        "fast_p": tables["fast_p"],
        "fast_p_kernelbench": tables["fast_p_kernelbench"],
        "countings": dict(scoring.COUNTING_LABELS),
        "problem_steps": _problem_steps(run, problems),
        "steps_page": problems.number,
        "steps_pages": problems.paginator.num_pages,
    }
