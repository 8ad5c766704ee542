"""Submission workflows: the HTML view, the REST API, the CLI and model runs all call these.

Beside them, by what they hold: the checks of a source (sources.py), the refusals (errors.py),
handing work to a queue (queues.py), a submission's live status (events.py), re-verifications
(reverifications.py) and Nsight Compute reports (ncu_reports.py).
"""

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from accounts.services import may_submit
from evaluation.models import Hardware
from evaluator import backends
from problems.models import Problem, source_hash
from problems.selectors import problem_by_name
from submissions.errors import BatchError, SubmissionError
from submissions.events import submission_status_publish
from submissions.models import Batch, Submission
from submissions.queues import enqueue_evaluation
from submissions.quotas import QuotaExceeded, Work, quota_check
from submissions.runs.models import Model, Run
from submissions.sources import check_kernel_source, check_source_text, clean_filename

PRECISIONS = ("fp32", "fp16", "bf16")
BATCH_MAX = 100
IDEMPOTENCY_KEY_MAX = 190  # the column holds 200; a batch appends ":<index>" to the key


def _check_idempotency_key(key: str) -> None:
    if len(key) > IDEMPOTENCY_KEY_MAX:
        raise SubmissionError(
            f"The idempotency key is {len(key)} characters; the limit is {IDEMPOTENCY_KEY_MAX}.",
            code="invalid_idempotency_key",
        )


def _check_choices(
    *, user, problem: Problem, backend: str, hardware: Hardware, precision: str
) -> None:
    if not problem.is_visible_to(user):
        # A draft or held problem does not exist for this user (Problem.objects.visible_to).
        raise SubmissionError(f"There is no problem {problem.slug!r}.", code="unknown_problem")
    if not problem.takes_submissions_from(user):
        raise SubmissionError(
            f"{problem.slug} is retired and takes no submissions.", code="retired"
        )
    if problem.current_version_id is None:
        raise SubmissionError(f"{problem.slug} has no reference yet.", code="unknown_problem")
    # The backends' table decides (Submission.backend has no choices, so that a new language
    # needs no migration): read at each call.
    if backend not in backends.NAMES:
        raise SubmissionError(
            f"Unknown backend {backend!r}: one of {', '.join(backends.NAMES)}.",
            code="unknown_backend", allowed=list(backends.NAMES),
        )
    if hardware.backends and backend not in hardware.backends:
        raise SubmissionError(
            f"Hardware {hardware.slug} does not run the {backend} backend.",
            code="unknown_backend",
            allowed=list(hardware.backends),
        )
    if precision not in PRECISIONS:
        raise SubmissionError(
            f"Unknown precision {precision!r}.", code="unknown_precision", allowed=list(PRECISIONS)
        )


def _check_test_run(*, test_run: bool, timed: bool, run: Run | None) -> None:
    if not timed and not test_run:
        raise SubmissionError(
            "A ranked submission is always timed; only a test run may leave the timing out.",
            code="invalid",
        )
    if test_run and run is not None:
        raise SubmissionError(
            "A model run's samples are ranked submissions; a test run cannot belong to a run.",
            code="invalid",
        )


def _check_quota(user, *, work: list[Work]) -> None:
    try:
        quota_check(user=user, work=work)
    except QuotaExceeded as error:
        refused = SubmissionError(error.message, code=error.code, retry_after=error.retry_after)
        refused.figures = error.figures  # the budget, used, reserved, when it frees
        raise refused from None


def _lock_user(user) -> None:
    """Serialize one user's concurrent submissions so that the quota check holds.

    PostgreSQL locks the user's row; SQLite ignores FOR UPDATE, but its transactions here begin
    IMMEDIATE and so are serialized already.
    """
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk"))


def _check_may_submit(user) -> None:
    """An account that may not submit now (disabled, or its email address not yet verified
    where the site requires it: accounts.services.may_submit) is refused, 403, with why."""
    if user is None:  # work the site makes itself (a model run's samples name their owner)
        return
    allowed, reason = may_submit(user=user)
    if not allowed:
        raise SubmissionError(reason, code="forbidden")


def submission_create(
    *,
    user,
    problem: Problem,
    source: str,
    backend: str,
    hardware: Hardware,
    precision: str = "fp32",
    filename: str = "",
    model: Model | None = None,
    run: Run | None = None,
    sample_index: int = 0,
    idempotency_key: str = "",
    test_run: bool = False,
    timed: bool = True,
    batch: Batch | None = None,
) -> Submission:
    """Validate and store a submission, then queue its evaluation once the row is committed.

    A test run (`test_run`) is checked for correctness, timed only with `timed`, and never
    ranked; it counts against the quotas like any other, by the evaluation time it takes.

    With an idempotency key, a retried request returns the submission made by the first one
    (quotas are not counted again for it). Over a quota, SubmissionError with a quota_* code.
    A locked or unreachable database raises DatabaseError with nothing stored.
    """
    _check_may_submit(user)
    check_source_text(source)
    _check_choices(
        user=user, problem=problem, backend=backend, hardware=hardware, precision=precision
    )
    _check_idempotency_key(idempotency_key)
    _check_test_run(test_run=test_run, timed=timed, run=run)
    check_kernel_source(source)
    if idempotency_key and user is not None:
        existing = Submission.objects.filter(user=user, idempotency_key=idempotency_key).first()
        if existing is not None:
            return existing
    try:
        with transaction.atomic():
            if user is not None:
                _lock_user(user)
                _check_quota(user, work=[Work(problem.pk, hardware.pk, timed)])
            submission = Submission.objects.create(
                user=user,
                model=model,
                run=run,
                sample_index=sample_index,
                problem=problem,
                problem_version_id=problem.current_version_id,
                hardware=hardware,
                backend=backend,
                precision=precision,
                source=source,
                source_hash=source_hash(source),
                filename=clean_filename(filename),
                idempotency_key=idempotency_key if user is not None else "",
                test_run=test_run,
                timed=timed,
                batch=batch,
            )
            # Both after the commit, and neither may raise there: the submission is stored,
            # so the request must not fail (a client retrying without a key would duplicate
            # it), and one failing callback would skip the next ones of a batch.
            transaction.on_commit(lambda: enqueue_evaluation(submission), robust=True)
            transaction.on_commit(
                lambda: submission_status_publish(submission=submission), robust=True
            )
    except IntegrityError:
        # Two requests with one idempotency key raced; the other one's row is the answer.
        existing = Submission.objects.filter(user=user, idempotency_key=idempotency_key).first()
        if existing is None:
            raise
        return existing
    return submission


def problem_for_submission(
    *, user=None, slug: str = "", level: int | None = None, number: int | None = None
) -> Problem:
    """The problem a request names: by its slug (`level1/19_ReLU`; `1/19` too, as the URLs take
    it: problems.selectors), or by level and number (both given, they must name the same
    problem). One the user may not see is not there."""
    visible = Problem.objects.visible_to(user)
    open_problems = Problem.objects.open_for_submissions(user)
    if slug:
        problem = problem_by_name(visible, name=slug)
        if problem is None:
            raise SubmissionError(
                f"There is no problem {slug!r}.", code="unknown_problem",
                allowed=list(open_problems.values_list("slug", flat=True)),
            )
        if (level, number) != (None, None) and (level, number) != (
            problem.level, problem.number
        ):
            raise SubmissionError(
                f"{slug} is problem {problem.number} of level {problem.level}, not the level "
                f"{level} and number {number} given with it; give either.",
                code="problem_mismatch",
            )
        return problem
    if level is None or number is None:
        raise SubmissionError(
            "Name the problem: its slug (`problem`, e.g. level1/19_ReLU), or `level` and "
            "`number`.",
            code="problem_required",
        )
    problem = problem_by_name(visible, level=level, number=number)
    if problem is None:
        raise SubmissionError(
            f"There is no problem {number} in level {level}.",
            code="unknown_problem",
            allowed=[f"{p.level}/{p.number}" for p in open_problems.only("level", "number")],
        )
    return problem


def hardware_for_submission(*, slug: str = "") -> Hardware:
    """The hardware a request names by its slug; left out, the only one there is."""
    if not slug:
        registered = list(Hardware.objects.order_by("slug")[:2])
        if len(registered) == 1:
            return registered[0]
        raise SubmissionError(
            "Name the hardware (`hardware`): this site has more than one." if registered
            else "This site has no hardware registered yet.",
            code="hardware_required",
            allowed=list(Hardware.objects.values_list("slug", flat=True)),
        )
    hardware = Hardware.objects.filter(slug=slug).first()
    if hardware is None:
        raise SubmissionError(
            f"Unknown hardware {slug!r}.",
            code="unknown_hardware",
            allowed=list(Hardware.objects.values_list("slug", flat=True)),
        )
    return hardware


def _model_and_run_for(
    *, user, model_name: str, run_id: int | None
) -> tuple[Model | None, Run | None]:
    """Who may speak for a model: its run's creator or an admin (boards rank models by these)."""
    run = None
    if run_id is not None:
        run = Run.objects.select_related("model").filter(pk=run_id).first()
        if run is None:
            raise SubmissionError(f"There is no run {run_id}.", code="unknown_run")
        if not (user.is_staff or run.created_by_id == user.pk):
            raise SubmissionError(
                f"Run {run_id} is not yours; only its creator or an admin submits for it.",
                code="forbidden",
            )
    model = None
    if model_name:
        model = Model.objects.filter(litellm_name=model_name).first()
        if model is None:
            raise SubmissionError(
                f"Unknown model {model_name!r}.",
                code="unknown_model",
                allowed=list(
                    Model.objects.filter(active=True).values_list("litellm_name", flat=True)
                ),
            )
        if run is not None and run.model_id != model.pk:
            raise SubmissionError(
                f"Run {run.pk} belongs to {run.model.litellm_name}, not {model_name}.",
                code="invalid_model",
            )
        if run is None and not user.is_staff:
            raise SubmissionError(
                "Only admins submit on behalf of a model outside a run.", code="forbidden"
            )
    elif run is not None:
        model = run.model
    return model, run


def submission_resolve(
    *,
    user,
    backend: str,
    source: str,
    problem: str = "",
    level: int | None = None,
    number: int | None = None,
    hardware: str = "",
    precision: str = "",
    model: str = "",
    run: int | None = None,
    filename: str = "",
    test_run: bool = False,
    timing: bool | None = None,
) -> dict:
    """Turn a request's names (the problem's slug or level/number, the hardware's slug, the only
    one when left out, a model's name) into submission_create's arguments, checking everything,
    so a batch can be validated whole before anything is stored. A test run is timed only when
    `timing` is true; a ranked submission always is (`timing` false for one is an error).
    """
    problem = problem_for_submission(user=user, slug=problem, level=level, number=number)
    hardware_row = hardware_for_submission(slug=hardware)
    model_row, run_row = _model_and_run_for(user=user, model_name=model, run_id=run)
    kwargs = {
        "problem": problem,
        "source": source,
        "backend": backend,
        "hardware": hardware_row,
        "precision": precision or problem.precision,
        "filename": filename,
        "model": model_row,
        "run": run_row,
        "test_run": test_run,
        "timed": bool(timing) if test_run else timing is not False,
    }
    check_source_text(source)
    _check_test_run(test_run=test_run, timed=kwargs["timed"], run=run_row)
    _check_choices(
        user=user, problem=problem, backend=backend, hardware=hardware_row,
        precision=kwargs["precision"],
    )
    check_kernel_source(source)
    return kwargs


def submission_create_batch(
    *, user, items: list[dict], idempotency_key: str = ""
) -> tuple[Batch, list[Submission]]:
    """Store every item or none: all are validated first, then created in one transaction, as
    one Batch (followed and cancelled as a whole). Returns the batch and its submissions in the
    items' order.

    Each item holds submission_resolve's arguments. With an idempotency key, item i gets the
    key "<key>:<i>", so a retried batch returns the submissions, and the batch, of the first one.
    """
    _check_may_submit(user)
    if not items:
        raise SubmissionError("The batch is empty.", code="empty_batch")
    if len(items) > BATCH_MAX:
        raise SubmissionError(
            f"A batch holds at most {BATCH_MAX} submissions, not {len(items)}.",
            code="batch_too_large",
        )
    _check_idempotency_key(idempotency_key)
    resolved: list[dict] = []
    errors: list[tuple[int, SubmissionError]] = []
    for index, item in enumerate(items):
        try:
            resolved.append(submission_resolve(user=user, **item))
        except SubmissionError as error:
            errors.append((index, error))
    if errors:
        raise BatchError(errors)
    if user is not None and not idempotency_key:
        # Checked for the whole batch first, for one clear answer; each create checks again.
        _check_quota(user, work=[Work(item["problem"].pk, item["hardware"].pk,
                                      item.get("timed", True)) for item in resolved])
    with transaction.atomic():
        batch = Batch.objects.create(user=user if getattr(user, "pk", None) else None)
        submissions = [
            submission_create(
                user=user,
                idempotency_key=f"{idempotency_key}:{index}" if idempotency_key else "",
                batch=batch,
                **kwargs,
            )
            for index, kwargs in enumerate(resolved)
        ]
        if not any(s.batch_id == batch.pk for s in submissions):
            # A retry: every submission is the first request's, and so is the batch (one
            # stored before batches had ids gets this one).
            earlier = {s.batch_id for s in submissions} - {None}
            if earlier:
                batch.delete()
                batch = Batch.objects.get(pk=earlier.pop())
            else:
                Submission.objects.filter(pk__in=[s.pk for s in submissions]).update(batch=batch)
    return batch, submissions
