"""Submission workflows: the HTML view, the REST API, the CLI and model runs all call these."""

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django_q.tasks import async_task

from evaluation.models import Hardware
from kbsite.live import publish, submission_group
from problems.models import Problem, source_hash
from submissions.models import ApiToken, Model, Run, Submission
from submissions.selectors import submission_status_payload

PRECISIONS = ("fp32", "fp16", "bf16")
BATCH_MAX = 100
IDEMPOTENCY_KEY_MAX = 190  # the column holds 200; a batch appends ":<index>" to the key
# last_used_at is written at most this often per token, so a busy agent's every request does
# not turn into a database write.
TOKEN_TOUCH_SECONDS = 60


class SubmissionError(Exception):
    """A submission that cannot be accepted; `code` says why, for HTTP status mapping."""

    def __init__(self, message: str, *, code: str, allowed: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code  # too_large, not_utf8, unknown_problem, unknown_backend, ...
        self.allowed = allowed


def decode_source(raw: bytes) -> str:
    if len(raw) > settings.SUBMISSION_MAX_BYTES:
        raise SubmissionError(
            f"The source is {len(raw)} bytes; the limit is {settings.SUBMISSION_MAX_BYTES}.",
            code="too_large",
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SubmissionError(
            f"The source is not UTF-8 text (byte {error.start} is invalid).", code="not_utf8"
        ) from None


def _check_source(source: str) -> None:
    try:
        size = len(source.encode("utf-8"))
    except UnicodeEncodeError as error:
        # JSON can carry lone surrogates ("\ud800") that decode to a str but are not UTF-8.
        raise SubmissionError(
            f"The source is not UTF-8 text (character {error.start} is invalid).",
            code="not_utf8",
        ) from None
    if size > settings.SUBMISSION_MAX_BYTES:
        raise SubmissionError(
            f"The source is {size} bytes; the limit is {settings.SUBMISSION_MAX_BYTES}.",
            code="too_large",
        )
    if not source.strip():
        raise SubmissionError("The source is empty.", code="empty")
    if "\x00" in source:
        raise SubmissionError("The source contains a NUL byte.", code="not_text")


def _check_idempotency_key(key: str) -> None:
    if len(key) > IDEMPOTENCY_KEY_MAX:
        raise SubmissionError(
            f"The idempotency key is {len(key)} characters; the limit is {IDEMPOTENCY_KEY_MAX}.",
            code="invalid_idempotency_key",
        )


def _check_choices(*, problem: Problem, backend: str, hardware: Hardware, precision: str) -> None:
    if not problem.is_open_for_submissions:
        raise SubmissionError(
            f"{problem.slug} is retired and takes no submissions.", code="retired"
        )
    if problem.current_version_id is None:
        raise SubmissionError(f"{problem.slug} has no reference yet.", code="unknown_problem")
    backends = list(Submission.Backend.values)
    if backend not in backends:
        raise SubmissionError(
            f"Unknown backend {backend!r}.", code="unknown_backend", allowed=backends
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
) -> Submission:
    """Validate and store a submission, then queue its evaluation once the row is committed.

    With an idempotency key, a retried request returns the submission made by the first one.
    """
    _check_source(source)
    _check_choices(problem=problem, backend=backend, hardware=hardware, precision=precision)
    _check_idempotency_key(idempotency_key)
    if idempotency_key and user is not None:
        existing = Submission.objects.filter(user=user, idempotency_key=idempotency_key).first()
        if existing is not None:
            return existing
    try:
        with transaction.atomic():
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
                filename=filename[:255],
                idempotency_key=idempotency_key if user is not None else "",
            )
            transaction.on_commit(lambda: enqueue_evaluation(submission))
            publish(
                submission_group(submission.pk),
                {"type": "status", **submission_status_payload(submission)},
            )
    except IntegrityError:
        # Two requests with one idempotency key raced; the other one's row is the answer.
        existing = Submission.objects.filter(user=user, idempotency_key=idempotency_key).first()
        if existing is None:
            raise
        return existing
    return submission


def problem_for_submission(*, level: int, number: int) -> Problem:
    problem = Problem.objects.filter(level=level, number=number).first()
    if problem is None:
        open_problems = Problem.objects.exclude(status=Problem.Status.RETIRED)
        raise SubmissionError(
            f"There is no problem {number} in level {level}.",
            code="unknown_problem",
            allowed=[f"{p.level}/{p.number}" for p in open_problems.only("level", "number")],
        )
    return problem


def hardware_for_submission(*, slug: str) -> Hardware:
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
    level: int,
    number: int,
    backend: str,
    hardware: str,
    source: str,
    precision: str = "",
    model: str = "",
    run: int | None = None,
    filename: str = "",
) -> dict:
    """Turn a request's names (level/number, hardware slug, model name) into submission_create's
    arguments, checking everything, so a batch can be validated whole before anything is stored.
    """
    problem = problem_for_submission(level=level, number=number)
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
    }
    _check_source(source)
    _check_choices(
        problem=problem, backend=backend, hardware=hardware_row, precision=kwargs["precision"]
    )
    return kwargs


class BatchError(Exception):
    """Some items of a batch are invalid; nothing of the batch was stored."""

    def __init__(self, errors: list[tuple[int, SubmissionError]]) -> None:
        super().__init__(f"{len(errors)} of the submissions are invalid; none was stored.")
        self.errors = errors


def submission_create_batch(
    *, user, items: list[dict], idempotency_key: str = ""
) -> list[Submission]:
    """Store every item or none: all are validated first, then created in one transaction.

    Each item holds submission_resolve's arguments. With an idempotency key, item i gets the
    key "<key>:<i>", so a retried batch returns the submissions of the first one.
    """
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
    with transaction.atomic():
        return [
            submission_create(
                user=user,
                idempotency_key=f"{idempotency_key}:{index}" if idempotency_key else "",
                **kwargs,
            )
            for index, kwargs in enumerate(resolved)
        ]


def api_token_create(*, user, name: str = "", scopes: list[str]) -> tuple[ApiToken, str]:
    """A new token for `user`; the key is returned once and only its hash is stored."""
    allowed = list(ApiToken.Scope.values)
    unknown = [scope for scope in scopes if scope not in allowed]
    if unknown or not scopes:
        raise SubmissionError(
            f"Choose at least one scope from {', '.join(allowed)}.",
            code="invalid_scopes",
            allowed=allowed,
        )
    ordered = [scope for scope in allowed if scope in scopes]
    return ApiToken.issue(user=user, name=name.strip()[:100], scopes=ordered)


def api_token_revoke(*, user, token_id: int) -> ApiToken:
    """Revoke one of `user`'s tokens; revoking twice keeps the first time."""
    token = ApiToken.objects.get(pk=token_id, user=user)
    if token.revoked_at is None:
        token.revoke()
    return token


def api_token_authenticate(*, key: str) -> ApiToken | None:
    """The live token with this key (and its user), or None; records when it was last used."""
    token = (
        ApiToken.objects.select_related("user")
        .filter(key_hash=ApiToken.hash_key(key), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    stale = token.last_used_at is None or (
        (now - token.last_used_at).total_seconds() > TOKEN_TOUCH_SECONDS
    )
    if stale:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def enqueue_evaluation(submission: Submission) -> None:
    async_task(
        "gpu_runner.tasks.evaluate",
        submission.pk,
        cluster=submission.hardware.queue_name,
        task_name=f"evaluate-{submission.pk}",
    )
