"""Model runs: a model generating kernels over problems; every sample is a submission.

A run is a grid of steps, one Generation row per (problem, sample, turn). Steps are created and
queued on the "generation" django-q2 cluster as they become ready, so a stopped run resumes
where it was: a step that is done, had no code, or failed is never asked again.

- `run_create` stores a pending run; `run_start` / `run_resume` mark it running and queue every
  step that is ready; `run_stop` makes queued steps return without calling the model.
- `generation_step` (one queued task) claims its step, asks the model with no transaction
  open, extracts the code and stores the answer, the submission (whose evaluation is queued on
  commit) and the tokens and cost, in one short transaction.
- With refinement, turn k+1 of a sample is ready once turn k's evaluation is stored; a watcher
  task on the same queue looks for such samples while the run is running.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.paginator import Page, Paginator
from django.db import transaction
from django.db.models import Count, F, Max, Q, Sum
from django.utils import timezone
from django_q.tasks import async_task

from evaluation import metrics, scoring
from evaluation.models import Hardware
from problems.models import Problem, Tag
from submissions.errors import SubmissionError
from submissions.models import Evaluation, Generation, Model, Run, RunSample, Submission
from submissions.selectors import latest_evaluations
from submissions.services import PRECISIONS, submission_create
from submissions.sources import decode_source

if TYPE_CHECKING:
    from submissions import llm


def _llm():
    """The LLM module, imported on first use: litellm is installed where models are called
    (web and generation workers), not on GPU runner hosts, which load this module's URLs."""
    from submissions import llm

    return llm


GENERATION_QUEUE = "generation"
MAX_SAMPLES = 100
MAX_REFINEMENT_TURNS = 10
MAX_TEMPERATURE = 2.0
FINISHED_STEPS = (Generation.Status.DONE, Generation.Status.NO_CODE, Generation.Status.FAILED)


class RunError(Exception):
    """A run request that cannot be carried out; `code` says why, for HTTP status mapping."""

    def __init__(self, message: str, *, code: str, allowed: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code  # no_problems, unknown_problem, bad_state, unknown_backend, ...
        self.allowed = allowed


# ---- creating and steering runs ---------------------------------------------------------------


def run_problems_select(
    *,
    problems: Iterable[Problem | str] | None = None,
    level: int | None = None,
    tag: str | None = None,
) -> list[Problem]:
    """The problems a run covers: a list (slugs or problems), or the published problems of a
    level and/or a tag; a list narrowed by level or tag keeps only those that match."""
    if problems is None and level is None and not tag:
        raise RunError("Choose the problems: a list, a level or a tag.", code="no_problems")
    chosen = Problem.objects.filter(current_version__isnull=False)
    if problems is not None:
        wanted = list(problems)
        slugs = {p.slug if isinstance(p, Problem) else str(p) for p in wanted}
        found = {p.slug: p for p in Problem.objects.filter(slug__in=slugs)}
        unknown = sorted(slugs - set(found))
        if unknown:
            raise RunError(f"Unknown problems: {', '.join(unknown)}.", code="unknown_problem")
        closed = sorted(s for s, p in found.items() if not p.is_open_for_submissions)
        if closed:
            raise RunError(f"Retired problems take no runs: {', '.join(closed)}.", code="retired")
        chosen = chosen.filter(slug__in=slugs)
    else:
        chosen = chosen.filter(status=Problem.Status.PUBLISHED)
    if level is not None:
        chosen = chosen.filter(level=level)
    if tag:
        if not Tag.objects.filter(name=tag).exists():
            raise RunError(f"Unknown tag {tag!r}.", code="unknown_tag")
        chosen = chosen.filter(tags__name=tag)
    selected = list(chosen.distinct().order_by("level", "number"))
    if not selected:
        raise RunError("No problem matches that choice.", code="no_problems")
    return selected


def _check_settings(
    *,
    model: Model,
    backend: str,
    hardware: Hardware,
    precision: str,
    samples_per_problem: int,
    temperature: float,
    prompt_style: str,
    refinement_turns: int,
) -> None:
    if not model.active:
        raise RunError(f"The model {model} is not active.", code="inactive_model")
    backends = list(Submission.Backend.values)
    if backend not in backends:
        raise RunError(f"Unknown backend {backend!r}.", code="unknown_backend", allowed=backends)
    if hardware.backends and backend not in hardware.backends:
        raise RunError(
            f"Hardware {hardware.slug} does not run the {backend} backend.",
            code="unknown_backend",
            allowed=list(hardware.backends),
        )
    if precision not in PRECISIONS:
        raise RunError(
            f"Unknown precision {precision!r}.", code="unknown_precision", allowed=list(PRECISIONS)
        )
    styles = list(Run.PromptStyle.values)
    if prompt_style not in styles:
        raise RunError(
            f"Unknown prompt style {prompt_style!r}.", code="unknown_prompt_style", allowed=styles
        )
    if prompt_style == Run.PromptStyle.TRITON and backend != Submission.Backend.TRITON:
        raise RunError(
            "The Triton prompt style asks for Triton kernels; use it with the triton backend.",
            code="unknown_prompt_style",
        )
    if not 1 <= samples_per_problem <= MAX_SAMPLES:
        raise RunError(
            f"Samples per problem must be between 1 and {MAX_SAMPLES}.", code="bad_samples"
        )
    if not 0 <= temperature <= MAX_TEMPERATURE:
        raise RunError(
            f"The temperature must be between 0 and {MAX_TEMPERATURE}.", code="bad_temperature"
        )
    if not 0 <= refinement_turns <= MAX_REFINEMENT_TURNS:
        raise RunError(
            f"Refinement turns must be between 0 and {MAX_REFINEMENT_TURNS}.", code="bad_turns"
        )


def run_create(
    *,
    model: Model,
    name: str = "",
    problems: Iterable[Problem | str] | None = None,
    level: int | None = None,
    tag: str | None = None,
    backend: str,
    hardware: Hardware,
    precision: str = "fp32",
    samples_per_problem: int = 1,
    temperature: float = 0.0,
    prompt_style: str = Run.PromptStyle.ONE_SHOT,
    refinement_turns: int = 0,
    user=None,
) -> Run:
    """Validate and store a pending run (nothing is asked of the model until it starts)."""
    _check_settings(
        model=model,
        backend=backend,
        hardware=hardware,
        precision=precision,
        samples_per_problem=samples_per_problem,
        temperature=temperature,
        prompt_style=prompt_style,
        refinement_turns=refinement_turns,
    )
    selected = run_problems_select(problems=problems, level=level, tag=tag)
    name = name.strip() or f"{model} on {hardware.slug}, {timezone.now():%Y-%m-%d %H:%M}"
    with transaction.atomic():
        run = Run.objects.create(
            name=name[:200],
            model=model,
            backend=backend,
            hardware=hardware,
            precision=precision,
            samples_per_problem=samples_per_problem,
            temperature=temperature,
            prompt_style=prompt_style,
            refinement_turns=refinement_turns,
            created_by=user if user is not None and user.is_authenticated else None,
        )
        run.problems.set(selected)
    return run


def _move(run: Run, *, from_states: Iterable[str], to: str, action: str, **extra) -> Run:
    """A conditional update, so two people pressing stop and resume at once cannot both win."""
    moved = Run.objects.filter(pk=run.pk, status__in=list(from_states)).update(status=to, **extra)
    run.refresh_from_db()
    if not moved:
        raise RunError(f"Run {run.pk} is {run.status}; it cannot be {action}.", code="bad_state")
    return run


def run_start(*, run: Run) -> Run:
    run = _move(run, from_states=[Run.Status.PENDING], to=Run.Status.RUNNING, action="started")
    run_advance(run=run, requeue_pending=True)
    _enqueue_watch(run)
    return run


def run_stop(*, run: Run) -> Run:
    """Queued steps return without asking the model; a call already made is still stored."""
    return _move(
        run, from_states=[Run.Status.PENDING, Run.Status.RUNNING], to=Run.Status.STOPPED,
        action="stopped",
    )


def run_resume(*, run: Run) -> Run:
    """Queue again every step not finished. A running run may be resumed too: its steps are
    sent again (after a generation worker died, say); a step's claim lets one copy through."""
    run = _move(
        run, from_states=[Run.Status.STOPPED, Run.Status.RUNNING], to=Run.Status.RUNNING,
        action="resumed", finished_at=None,
    )
    run_advance(run=run, requeue_pending=True)
    _enqueue_watch(run)
    return run


def _finish(run: Run) -> None:
    Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
        status=Run.Status.FINISHED, finished_at=timezone.now()
    )


# ---- the step grid ----------------------------------------------------------------------------


def _enqueue_step(generation_id: int, attempts: int) -> None:
    """Queue a step once the row is committed; `attempts` is the claim it must win."""
    transaction.on_commit(
        lambda: async_task(
            "submissions.run_tasks.generate",
            generation_id,
            attempts,
            cluster=GENERATION_QUEUE,
            task_name=f"generate-{generation_id}-{attempts}",
        )
    )


def _enqueue_watch(run: Run) -> None:
    if run.refinement_turns == 0:
        return  # without refinement every step is queued up front; no waiting to watch
    transaction.on_commit(
        lambda: async_task(
            "submissions.run_tasks.watch",
            run.pk,
            cluster=GENERATION_QUEUE,
            task_name=f"watch-run-{run.pk}",
            save=False,  # it requeues itself while waiting: keep its results out of the table
        )
    )


def run_advance(*, run: Run, requeue_pending: bool = False) -> int:
    """Create and queue the steps that are ready; finish the run when no step is left.

    A sample's chain is complete when its last turn is finished, or a turn failed (the
    provider gave no answer after retries). Turn k+1 is ready when turn k had no code, or its
    submission's evaluation is stored. Returns how many steps were queued.
    """
    if run.status != Run.Status.RUNNING:
        return 0
    latest: dict[tuple[int, int], dict] = {}
    for row in run.generations.order_by("turn").values(
        "pk", "problem_id", "sample_index", "turn", "status", "attempts", "submission__status"
    ):
        latest[(row["problem_id"], row["sample_index"])] = row
    queued = 0
    complete = True
    for problem_id in run.problems.order_by("level", "number").values_list("pk", flat=True):
        for sample in range(run.samples_per_problem):
            row = latest.get((problem_id, sample))
            next_turn = 0
            if row is not None:
                if row["status"] == Generation.Status.PENDING:
                    complete = False
                    if requeue_pending:
                        _enqueue_step(row["pk"], row["attempts"])
                        queued += 1
                    continue
                if row["status"] == Generation.Status.FAILED:
                    continue
                if row["turn"] >= run.refinement_turns:
                    continue
                waiting = row["submission__status"] not in (None, Submission.Status.FINISHED)
                if waiting:
                    complete = False
                    continue
                next_turn = row["turn"] + 1
            complete = False
            step, created = Generation.objects.get_or_create(
                run=run, problem_id=problem_id, sample_index=sample, turn=next_turn
            )
            if created or (requeue_pending and step.status == Generation.Status.PENDING):
                _enqueue_step(step.pk, step.attempts)
                queued += 1
    if complete:
        _finish(run)
    return queued


def run_watch(*, run_id: int) -> str:
    """Task body: advance a refining run, then look again a little later while it runs."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None or run.status != Run.Status.RUNNING:
        return "not running"
    run_advance(run=run)
    run.refresh_from_db(fields=["status"])
    if run.status != Run.Status.RUNNING:
        return run.status
    # Sleeping here holds one generation worker briefly; it keeps the django-q2 scheduler
    # (which looks at schedules only every 30 s) out of every refinement turn's latency.
    time.sleep(float(getattr(settings, "RUN_WATCH_SECONDS", 2.0)))
    _enqueue_watch(run)
    return "watching"


# ---- one step ---------------------------------------------------------------------------------


def _evaluation_feedback(evaluation: Evaluation | None) -> dict | None:
    if evaluation is None:
        return None
    return {
        "verdict": evaluation.verdict,
        "error": evaluation.error,
        "compile_log": evaluation.compile_log,
        "traceback": evaluation.traceback,
        "flags": evaluation.flags,
        "candidate_ms": evaluation.candidate_median_ms,
        "reference_ms": evaluation.reference_median_ms,
        "speedup": evaluation.speedup,
        # A failed trial's diagnosis (evaluator/judge/diagnose.py): hint, worst elements.
        "diagnosis": next((t["diagnosis"] for t in evaluation.trials or []
                           if isinstance(t, dict) and t.get("diagnosis")), None),
        # Where the device time went (GPU evaluations): the kernels of both sides.
        "profile": evaluation.profile or None,
    }


def step_messages(generation: Generation) -> list[dict]:
    """The conversation for a step: the one-shot prompt, then each earlier turn's answer and
    what the evaluator said about it."""
    run = generation.run
    messages = [
        {
            "role": "user",
            "content": _llm().build_prompt(
                reference_source=generation.problem.source,
                backend=run.backend,
                prompt_style=run.prompt_style,
            ),
        }
    ]
    earlier = Generation.objects.filter(
        run=run,
        problem=generation.problem,
        sample_index=generation.sample_index,
        turn__lt=generation.turn,
    ).select_related("submission")
    for previous in earlier.order_by("turn"):
        messages.append({"role": "assistant", "content": previous.response or "(no answer)"})
        submission = previous.submission
        feedback = _llm().feedback_message(
            evaluation=_evaluation_feedback(submission.latest_evaluation if submission else None),
            had_code=submission is not None,
        )
        if submission is None and previous.error:
            feedback = f"{previous.error}\n\n{feedback}"
        messages.append({"role": "user", "content": feedback})
    return messages


def _deadline() -> float:
    """Leave the queue's hard timeout some room, so a slow provider ends as a failed step."""
    timeout = float(getattr(settings, "Q_TIMEOUT", 360))
    return time.monotonic() + max(30.0, timeout - 30.0)


def generation_step(*, generation_id: int, attempts: int) -> str:
    """Task body: ask the model for one step and store what it answered."""
    generation = (
        Generation.objects.select_related("run__model", "run__hardware", "problem__current_version")
        .filter(pk=generation_id)
        .first()
    )
    if generation is None:
        return "gone"
    run = generation.run
    if run.status != Run.Status.RUNNING:
        return f"run {run.status}"
    if generation.status != Generation.Status.PENDING:
        return f"already {generation.status}"
    messages = step_messages(generation)
    # The claim: only the copy of this task that saw these attempts goes on to call the model.
    claimed = Generation.objects.filter(
        pk=generation.pk, status=Generation.Status.PENDING, attempts=attempts
    ).update(attempts=attempts + 1, prompt=_llm().render_messages(messages))
    if not claimed:
        return "not claimed"

    model = run.model
    answer: llm.Answer | None = None
    try:
        mock = _llm().mock_for(
            model=model.litellm_name,
            problem=generation.problem.slug,
            sample=generation.sample_index,
            turn=generation.turn,
        )
        answer = _llm().complete(
            model=_llm().ModelSettings(
                litellm_name=model.litellm_name,
                api_key_env=model.api_key_env,
                api_base_env=model.api_base_env,
            ),
            messages=messages,
            temperature=run.temperature,
            mock=mock,
            deadline=_deadline(),
        )
    except _llm().LLMFailure as failure:
        _store_failure(generation, failure)
    else:
        _store_answer(generation, answer)
    run.refresh_from_db(fields=["status"])
    run_advance(run=run)
    generation.refresh_from_db(fields=["status"])
    return generation.status


def _store_failure(generation: Generation, failure: llm.LLMFailure) -> None:
    Generation.objects.filter(pk=generation.pk, status=Generation.Status.PENDING).update(
        status=Generation.Status.FAILED,
        error=failure.message[:10000],
        attempts=F("attempts") + max(failure.tries - 1, 0),
        finished_at=timezone.now(),
    )


def _store_answer(generation: Generation, answer: llm.Answer) -> None:
    run = generation.run
    code = _llm().extract_code(answer.text)
    with transaction.atomic():
        won = Generation.objects.filter(pk=generation.pk, status=Generation.Status.PENDING).update(
            status=Generation.Status.DONE if code else Generation.Status.NO_CODE,
            response=answer.text,
            error="" if code else "The answer has no Python code block defining ModelNew.",
            prompt_tokens=answer.prompt_tokens,
            completion_tokens=answer.completion_tokens,
            cost_usd=answer.cost_usd,
            attempts=F("attempts") + answer.tries - 1,
            finished_at=timezone.now(),
        )
        # A call that was paid for counts, even when a twin of this step stored first.
        Run.objects.filter(pk=run.pk).update(
            prompt_tokens=F("prompt_tokens") + answer.prompt_tokens,
            completion_tokens=F("completion_tokens") + answer.completion_tokens,
            cost_usd=F("cost_usd") + answer.cost_usd,
        )
        if not won or not code:
            return
        try:
            submission = submission_create(
                user=None,
                problem=generation.problem,
                source=code,
                backend=run.backend,
                hardware=run.hardware,
                precision=run.precision,
                filename=f"run{run.pk}_{generation.problem.slug.replace('/', '_')}"
                f"_s{generation.sample_index}_t{generation.turn}.py",
                model=run.model,
                run=run,
                sample_index=generation.sample_index,
            )
        except SubmissionError as error:
            Generation.objects.filter(pk=generation.pk).update(
                status=Generation.Status.NO_CODE, error=f"The code was refused: {error.message}"
            )
            return
        Generation.objects.filter(pk=generation.pk).update(submission=submission)


# ---- reading a run ----------------------------------------------------------------------------


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


# ---- a run's samples, counted as their results land ---------------------------------------------
#
# A run's tables read every sample's result: read from the evaluations, that was 80 ms for a run
# of 3,000 samples, on every view after each new result. Each sample's result is kept instead
# (RunSample), recounted from its few submissions when one of their results lands.

# An evaluation of a run's submission: its scoring row, and where the submission sits in its run.
RUN_ROW_FIELDS = (*scoring.ROW_FIELDS, "submission__run_id", "submission__sample_index")


def sample_fields(results: list[dict]) -> dict:
    """RunSample's fields from the results of one sample's submissions (scoring rows, in
    submission order): the best of them (scoring.best_of_key; the first on a tie) as each
    counting counts it."""
    best = results[0]
    for result in results[1:]:
        if scoring.best_of_key(result) > scoring.best_of_key(best):
            best = result
    fields = {
        "evaluation_id": best["id"],
        "compiled": scoring.compiled(best),
        "correct_submissions": sum(1 for result in results if scoring.on_board(result)),
    }
    for counting, prefix in (("strict", ""), ("kernelbench", "kernelbench_")):
        fields[f"{prefix}correct"] = scoring.counted(best, counting)
        for baseline in scoring.BASELINES:
            fields[f"{prefix}speedup_{baseline}"] = scoring.counted_speedup(
                best, baseline, counting
            )
    return fields


def samples_of(
    rows: Iterable[dict], *, hardware_of: dict[int, int]
) -> dict[tuple[int, int, int], dict]:
    """RunSample's fields per (run, problem, sample index), from evaluation rows (RUN_ROW_FIELDS)
    ordered by submission, latest first: a submission's result is its latest evaluation on its
    run's hardware (`hardware_of`: run id to hardware id), whatever its purpose, as
    latest_evaluations has it. Plain values in and out: the migration that added RunSample
    fills it with this too."""
    latest: dict[int, dict] = {}
    for row in rows:
        if row["hardware_id"] == hardware_of.get(row["submission__run_id"]):
            latest.setdefault(row["submission_id"], row)
    by_sample: dict[tuple[int, int, int], list[dict]] = defaultdict(list)
    for row in latest.values():
        sample = (row["submission__run_id"], row["submission__problem_id"],
                  row["submission__sample_index"])
        by_sample[sample].append(row)
    return {sample: sample_fields(results) for sample, results in by_sample.items()}


def run_sample_refresh(*, submission: Submission) -> None:
    """A result of this submission landed, or its re-verification decided it: if it is a run's,
    recount its sample from the results of the sample's submissions (one a turn)."""
    if submission.run_id is None:
        return
    sample = {"run_id": submission.run_id, "problem_id": submission.problem_id,
              "sample_index": submission.sample_index}
    hardware_id = Run.objects.values_list("hardware_id", flat=True).get(pk=submission.run_id)
    # The sample's submissions first (the run's index), then their evaluations (theirs).
    ids = list(Submission.objects.filter(**sample).values_list("pk", flat=True))
    rows = (
        Evaluation.objects.filter(submission_id__in=ids)
        .order_by("submission_id", "-finished_at", "-id")
        .values(*RUN_ROW_FIELDS)
    )
    fields = samples_of(rows, hardware_of={submission.run_id: hardware_id}).get(
        (submission.run_id, submission.problem_id, submission.sample_index)
    )
    if fields is None:
        RunSample.objects.filter(**sample).delete()
        return
    RunSample.objects.update_or_create(**sample, defaults=fields)


def run_samples_rebuild(*, run: Run | None = None) -> int:
    """Recount every sample of every run (or of one) from the evaluations, if the kept ones
    are ever in doubt. Returns how many were written."""
    runs = Run.objects.all() if run is None else Run.objects.filter(pk=run.pk)
    written = 0
    for run_id, hardware_id in runs.values_list("pk", "hardware_id"):
        rows = (
            Evaluation.objects.filter(submission__run_id=run_id)
            .order_by("submission_id", "-finished_at", "-id")
            .values(*RUN_ROW_FIELDS)
        )
        samples = [
            RunSample(run_id=run_id, problem_id=problem_id, sample_index=index, **fields)
            for (_, problem_id, index), fields in samples_of(
                rows.iterator(chunk_size=2000), hardware_of={run_id: hardware_id}
            ).items()
        ]
        with transaction.atomic():
            RunSample.objects.filter(run_id=run_id).delete()
            RunSample.objects.bulk_create(samples, batch_size=2000)
        written += len(samples)
    return written


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


# ---- importing a KernelBench generations folder ------------------------------------------------

GENERATION_FILE = re.compile(
    r"^level_(?P<level>\d+)_problem_(?P<number>\d+)_sample_(?P<sample>\d+)_kernel\.py$"
)


@dataclass
class ImportReport:
    run: Run
    imported: int
    skipped: list[tuple[str, str]]  # (file name, why)


def generations_import(
    *,
    folder: Path,
    model_name: str,
    hardware: Hardware,
    backend: str = "cuda",
    precision: str = "fp32",
    name: str = "",
    user=None,
) -> ImportReport:
    """Store a folder of KernelBench generations (level_L_problem_P_sample_S_kernel.py) as a
    finished run of the named model; every file becomes a submission queued for evaluation.

    Files that cannot be imported are listed with the reason and left as they are; nothing is
    stored when no file can be imported.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise RunError(f"{folder} is not a folder.", code="not_a_folder")
    model_name = model_name.strip()
    if not model_name:
        raise RunError("Name the model that generated these kernels.", code="no_model")
    skipped: list[tuple[str, str]] = []
    found: dict[tuple[int, int, int], tuple[str, str]] = {}  # (level, number, sample)
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        match = GENERATION_FILE.match(path.name)
        if not match:
            skipped.append((path.name, "not named level_L_problem_P_sample_S_kernel.py"))
            continue
        key = (int(match["level"]), int(match["number"]), int(match["sample"]))
        if key in found:
            skipped.append((path.name, f"the same sample as {found[key][0]}"))
            continue
        try:
            source = decode_source(path.read_bytes())
        except SubmissionError as error:
            skipped.append((path.name, error.message))
            continue
        if not source.strip():
            skipped.append((path.name, "the file is empty"))
            continue
        found[key] = (path.name, source)
    problems = {
        (p.level, p.number): p
        for p in Problem.objects.filter(
            level__in={k[0] for k in found}, number__in={k[1] for k in found}
        )
    }
    for key in [k for k in found if (k[0], k[1]) not in problems]:
        skipped.append((found.pop(key)[0], f"there is no problem {key[1]} in level {key[0]}"))
    if not found:
        reasons = "; ".join(f"{f}: {why}" for f, why in skipped) or "the folder is empty"
        raise RunError(f"Nothing to import from {folder} ({reasons}).", code="nothing_to_import")

    model = Model.objects.filter(litellm_name=model_name).first()
    _check_settings(
        model=model or Model(litellm_name=model_name),
        backend=backend,
        hardware=hardware,
        precision=precision,
        samples_per_problem=1,
        temperature=0.0,
        prompt_style=Run.PromptStyle.ONE_SHOT,
        refinement_turns=0,
    )
    now = timezone.now()
    imported = 0
    with transaction.atomic():
        if model is None:
            model = Model.objects.create(litellm_name=model_name, display_name=model_name)
        run = Run.objects.create(
            name=(name.strip() or f"{model_name} (imported from {folder.name})")[:200],
            model=model,
            backend=backend,
            hardware=hardware,
            precision=precision,
            samples_per_problem=max(sample for _, _, sample in found) + 1,
            status=Run.Status.FINISHED,
            created_by=user if user is not None and user.is_authenticated else None,
            finished_at=now,
        )
        run.problems.set({problems[(level, number)] for level, number, _ in found})
        for (level, number, sample), (filename, source) in sorted(found.items()):
            problem = problems[(level, number)]
            try:
                submission = submission_create(
                    user=None,
                    problem=problem,
                    source=source,
                    backend=backend,
                    hardware=hardware,
                    precision=precision,
                    filename=filename,
                    model=model,
                    run=run,
                    sample_index=sample,
                )
            except SubmissionError as error:
                skipped.append((filename, error.message))
                continue
            Generation.objects.create(
                run=run,
                problem=problem,
                sample_index=sample,
                status=Generation.Status.DONE,
                prompt=f"(imported from {filename})",
                response=source,
                submission=submission,
                finished_at=now,
            )
            imported += 1
        if not imported:
            reasons = "; ".join(f"{f}: {why}" for f, why in skipped)
            raise RunError(f"Nothing could be imported ({reasons}).", code="nothing_to_import")
    return ImportReport(run=run, imported=imported, skipped=skipped)
