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

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django_q.tasks import async_task

from evaluation.models import Hardware
from evaluator import backends
from evaluator.backends.triton import BACKEND as TRITON
from problems.models import Problem, Tag
from submissions.errors import SubmissionError
from submissions.models import Evaluation, Submission
from submissions.runs.models import Generation, Model, Run
from submissions.services import PRECISIONS, submission_create

if TYPE_CHECKING:
    from submissions.runs import llm


def _llm():
    """The LLM module, imported on first use: litellm is installed where models are called
    (web and generation workers), not on GPU runner hosts, which load this module's URLs."""
    from submissions.runs import llm

    return llm


GENERATION_QUEUE = "generation"
MAX_SAMPLES = 100
MAX_REFINEMENT_TURNS = 10
MAX_TEMPERATURE = 2.0


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


def run_settings_check(
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
    """The settings of a run, checked before it is stored: a RunError says which is wrong."""
    if not model.active:
        raise RunError(f"The model {model} is not active.", code="inactive_model")
    if backend not in backends.NAMES:  # the backends' table, read at each call
        raise RunError(f"Unknown backend {backend!r}: one of {', '.join(backends.NAMES)}.",
                       code="unknown_backend", allowed=list(backends.NAMES))
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
    if prompt_style == Run.PromptStyle.TRITON and backend != TRITON.name:
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
    run_settings_check(
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
            "submissions.runs.tasks.generate",
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
            "submissions.runs.tasks.watch",
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
                # A cancelled sample has ended too: its next turn goes on without feedback.
                waiting = row["submission__status"] not in (None, *Submission.ENDED)
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
    timeout = float(getattr(settings, "GENERATION_Q_TIMEOUT", 360))
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
