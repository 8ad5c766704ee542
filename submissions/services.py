"""Submission workflows: the HTML view, the REST API, the CLI and model runs all call these."""

from django.conf import settings
from django.db import IntegrityError, transaction
from django_q.tasks import async_task

from evaluation.models import Hardware
from kbsite.live import publish, submission_group
from problems.models import Problem, source_hash
from submissions.models import Model, Run, Submission
from submissions.selectors import submission_status_payload

PRECISIONS = ("fp32", "fp16", "bf16")


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
    size = len(source.encode("utf-8"))
    if size > settings.SUBMISSION_MAX_BYTES:
        raise SubmissionError(
            f"The source is {size} bytes; the limit is {settings.SUBMISSION_MAX_BYTES}.",
            code="too_large",
        )
    if not source.strip():
        raise SubmissionError("The source is empty.", code="empty")
    if "\x00" in source:
        raise SubmissionError("The source contains a NUL byte.", code="not_text")


def _check_choices(*, problem: Problem, backend: str, hardware: Hardware, precision: str) -> None:
    if not problem.is_open_for_submissions:
        raise SubmissionError(f"{problem.slug} is retired and takes no submissions.", code="retired")
    if problem.current_version_id is None:
        raise SubmissionError(f"{problem.slug} has no reference yet.", code="unknown_problem")
    backends = list(Submission.Backend.values)
    if backend not in backends:
        raise SubmissionError(f"Unknown backend {backend!r}.", code="unknown_backend", allowed=backends)
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


def enqueue_evaluation(submission: Submission) -> None:
    async_task(
        "gpu_runner.tasks.evaluate",
        submission.pk,
        cluster=submission.hardware.queue_name,
        task_name=f"evaluate-{submission.pk}",
    )
