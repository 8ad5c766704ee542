"""Submission workflows: the HTML view, the REST API, the CLI and model runs all call these."""

import ast
import logging
import re
import time
import warnings

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone
from django_q.tasks import async_task

from evaluation import leases
from evaluation.models import Hardware
from kbsite.live import publish, submission_group
from problems.models import Problem, source_hash
from submissions.models import (
    Evaluation,
    Model,
    NcuReport,
    Reverification,
    Run,
    Submission,
)
from submissions.quotas import (
    QuotaExceeded,
    ncu_quota_check,
    quota_check,
    reverify_quota_check,
)
from submissions.selectors import submission_status_payload

log = logging.getLogger(__name__)

PRECISIONS = ("fp32", "fp16", "bf16")
BATCH_MAX = 100
IDEMPOTENCY_KEY_MAX = 190  # the column holds 200; a batch appends ":<index>" to the key
# Handing a task to the broker is retried this many times (a locked database, a Redis blip)
# before the submission is left to the sweep for unqueued submissions.
ENQUEUE_ATTEMPTS = 3


class SubmissionError(Exception):
    """A submission that cannot be accepted; `code` says why, for HTTP status mapping."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        allowed: list[str] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code  # too_large, not_utf8, unknown_problem, quota_queued, ...
        self.allowed = allowed
        self.retry_after = retry_after  # seconds, for the quota errors


_FILENAME_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def clean_filename(name: str) -> str:
    """An uploaded file's name without control characters (newlines, terminal escapes).

    It is kept otherwise as sent: pages escape it, and download headers quote it.
    """
    return _FILENAME_CONTROL.sub("", name or "").strip()[:255]


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


# The name the evaluator loads from a kernel's module and calls with the problem's init inputs.
MODEL_NEW = "ModelNew"
# Blocks whose bodies are scopes of their own: a ModelNew bound in them is not the module's.
_OWN_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


class SourceError(SubmissionError):
    """The source is not Python defining ModelNew; `line` is where (1-based), when known."""

    def __init__(self, message: str, *, code: str, line: int | None = None) -> None:
        super().__init__(message, code=code)
        self.line = line


def _module_bindings(tree: ast.Module) -> set[str]:
    """The names the module's own scope binds: classes, defs, assignments, imports, walrus,
    loop and `with` targets, at any depth of if/try/for/with, not inside a def or class body."""
    names: set[str] = set()
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, _OWN_SCOPES):
            if not isinstance(node, ast.Lambda):
                names.add(node.name)
                pending.extend(node.decorator_list)  # evaluated in the module's scope
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias) and node.name != "*":
            names.add(node.asname or node.name.split(".")[0])
        pending.extend(ast.iter_child_nodes(node))
    return names


def _made_dynamically(tree: ast.Module) -> bool:
    """ModelNew bound in a way a parse cannot follow, but named: `global ModelNew` in a
    function, `module.ModelNew = ...`, `globals()["ModelNew"] = ...`, `setattr(m, "ModelNew",
    ...)`, or `exec` of a source with `class ModelNew`. Given the benefit of the doubt: the
    evaluator still says compile_error when ModelNew is missing after all."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Global) and MODEL_NEW in node.names:
            return True
        stored = isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
        if stored and node.attr == MODEL_NEW:
            return True
        text = node.value if isinstance(node, ast.Constant) else None
        if isinstance(text, str) and (text == MODEL_NEW or f"class {MODEL_NEW}" in text):
            return True
    return False


def check_kernel_source(source: str) -> None:
    """Refuse at once a source that is not valid Python or defines no ModelNew.

    It is parsed with `ast`, never compiled to code or run (the evaluator does that, sandboxed,
    on a runner). Every backend's kernel is such a Python file: torch, or CUDA and C++ through
    load_inline, or Triton. SourceError (code syntax_error, with the line; or no_model_new).
    """
    try:
        with warnings.catch_warnings():
            # Invalid escape sequences and the like warn at parse time; the evaluator's
            # interpreter decides about those, not the upload.
            warnings.simplefilter("ignore")
            tree = ast.parse(source, filename="<submission>")
    except SyntaxError as error:
        line = error.lineno
        where = f"line {line}" if line else "an unknown line"
        if line and error.offset:
            where += f", column {error.offset}"
        text = (error.text or "").strip()
        quoted = f": {text[:120]}" if text else ""
        raise SourceError(
            f"The source is not valid Python: {error.msg} ({where}){quoted}",
            code="syntax_error",
            line=line,
        ) from None
    except (RecursionError, MemoryError):
        raise SourceError(
            "The source is nested too deeply to parse.", code="syntax_error"
        ) from None
    bound = _module_bindings(tree)
    if MODEL_NEW in bound or _made_dynamically(tree):
        return
    hint = (
        " It defines Model, the reference's name: name your class ModelNew."
        if "Model" in bound
        else ""
    )
    raise SourceError(
        "The source defines no ModelNew: the evaluator builds ModelNew(*get_init_inputs()) "
        "from the file, so define `class ModelNew(nn.Module)` at its top level (one inside a "
        f"function or class does not count).{hint}",
        code="no_model_new",
    )


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


def _check_quota(user, *, adding: int) -> None:
    try:
        quota_check(user=user, adding=adding)
    except QuotaExceeded as error:
        raise SubmissionError(
            error.message, code=error.code, retry_after=error.retry_after
        ) from None


def _lock_user(user) -> None:
    """Serialize one user's concurrent submissions so that the quota check holds.

    PostgreSQL locks the user's row; SQLite ignores FOR UPDATE, but its transactions here begin
    IMMEDIATE and so are serialized already.
    """
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk"))


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
) -> Submission:
    """Validate and store a submission, then queue its evaluation once the row is committed.

    A test run (`test_run`) is checked for correctness, timed only with `timed`, and never
    ranked; it counts against the quotas like any other, by the evaluation time it takes.

    With an idempotency key, a retried request returns the submission made by the first one
    (quotas are not counted again for it). Over a quota, SubmissionError with a quota_* code.
    A locked or unreachable database raises DatabaseError with nothing stored.
    """
    _check_source(source)
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
                _check_quota(user, adding=1)
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
            )
            # Both after the commit, and neither may raise there: the submission is stored,
            # so the request must not fail (a client retrying without a key would duplicate
            # it), and one failing callback would skip the next ones of a batch.
            transaction.on_commit(lambda: enqueue_evaluation(submission), robust=True)
            transaction.on_commit(lambda: _publish_created(submission), robust=True)
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
    """The problem a request names: by its slug (`level1/19_ReLU`), or by level and number
    (both given, they must name the same problem). One the user may not see is not there."""
    visible = Problem.objects.visible_to(user)
    open_problems = Problem.objects.open_for_submissions(user)
    if slug:
        problem = visible.filter(slug=slug).first()
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
    problem = visible.filter(level=level, number=number).first()
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
    _check_source(source)
    _check_test_run(test_run=test_run, timed=kwargs["timed"], run=run_row)
    _check_choices(
        user=user, problem=problem, backend=backend, hardware=hardware_row,
        precision=kwargs["precision"],
    )
    check_kernel_source(source)
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
    if user is not None and not idempotency_key:
        # Checked for the whole batch first, for one clear answer; each create checks again.
        _check_quota(user, adding=len(resolved))
    with transaction.atomic():
        return [
            submission_create(
                user=user,
                idempotency_key=f"{idempotency_key}:{index}" if idempotency_key else "",
                **kwargs,
            )
            for index, kwargs in enumerate(resolved)
        ]


def _publish_created(submission: Submission) -> None:
    try:
        publish(
            submission_group(submission.pk),
            {"type": "status", **submission_status_payload(submission)},
        )
    except DatabaseError:  # live events are a convenience; the row and its task are what count
        log.warning("could not publish the creation of submission %s", submission.pk)


def enqueue_evaluation(submission: Submission) -> bool:
    """Hand the evaluation to the hardware's queue; True once the broker has it.

    Never raises: the submission is committed already. When the broker cannot be reached after
    a few tries, `enqueued_at` stays empty and the runners' sweep queues it later; a
    task that arrives twice is harmless, as the runner's claim lets only one evaluate.
    """
    for attempt in range(1, ENQUEUE_ATTEMPTS + 1):
        try:
            async_task(
                "gpu_runner.tasks.evaluate",
                submission.pk,
                cluster=submission.hardware.queue_name,
                task_name=f"evaluate-{submission.pk}",
            )
            break
        except Exception:  # DatabaseError on the ORM broker, a connection error on Redis
            if attempt == ENQUEUE_ATTEMPTS:
                log.exception(
                    "could not enqueue submission %s; the sweep will queue it", submission.pk
                )
                return False
            time.sleep(0.5 * 2 ** (attempt - 1))
    try:
        Submission.objects.filter(pk=submission.pk, enqueued_at__isnull=True).update(
            enqueued_at=timezone.now()
        )
    except DatabaseError:  # the sweep may queue it once more; the claim keeps that harmless
        log.warning("submission %s is enqueued but not marked so", submission.pk)
    return True


# ---- re-verification ---------------------------------------------------------------------------


class ReverificationError(Exception):
    def __init__(self, message: str, *, code: str = "invalid") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def reverification_request(
    *, submission: Submission, reason: str, requested_by=None
) -> Reverification:
    """Queue a second evaluation of the submission with fresh secret seeds.

    It checks the submission's latest own evaluation, and prefers any runner but the one that
    did that evaluation (Reverification.may_run_on). For a new record (reason NEW_RECORD) the
    submission is held off the boards until it passes. Call it inside the transaction that
    decides it: the task is queued after the commit. ReverificationError when there is nothing
    to re-verify yet, or one is already queued or running.
    """
    checked = (
        submission.evaluations.filter(purpose=Evaluation.Purpose.SUBMISSION)
        .order_by("-finished_at", "-id")
        .first()
    )
    if submission.status != Submission.Status.FINISHED or checked is None:
        raise ReverificationError(f"Submission {submission.pk} has not been evaluated yet.",
                                  code="not_evaluated")
    if submission.test_run:
        raise ReverificationError(
            f"Submission {submission.pk} is a test run: it is never ranked, so there is "
            "nothing to re-verify. Submit it for ranking instead.", code="test_run")
    try:
        with transaction.atomic():
            reverification = Reverification.objects.create(
                submission=submission,
                reason=reason,
                checked_evaluation=checked,
                avoid_runner=checked.runner_name,
                requested_by=requested_by if getattr(requested_by, "pk", None) else None,
            )
    except IntegrityError:  # one_open_reverification
        raise ReverificationError(
            f"Submission {submission.pk} is already being re-verified.", code="already_open"
        ) from None
    if reason in (Reverification.Reason.NEW_RECORD, Reverification.Reason.OWNER):
        submission.hold_for_reverification()
    transaction.on_commit(lambda: enqueue_reverification(reverification), robust=True)
    return reverification


def reverification_request_by_owner(*, user, submission: Submission) -> Reverification:
    """Another attempt at re-verification, asked for by the submission's owner (or staff): only
    for a result held off the boards by a note on its timing (Evaluation.timing_held: it did not
    reproduce, or the judge's clock did not confirm it), within QUOTA_REVERIFICATIONS_PER_DAY a
    UTC day (staff exempt). The submission is
    pending again until it lands, and the re-verification goes as any other: a second evaluation
    with fresh seeds, a third where the first two disagree.

    ReverificationError (code forbidden, not_held, already_open, not_evaluated) or
    QuotaExceeded (quota_reverifications).
    """
    if not (user.is_staff or (submission.user_id and submission.user_id == user.pk)):
        raise ReverificationError(
            "Only the submission's owner and staff can ask for a re-verification.",
            code="forbidden",
        )
    with transaction.atomic():
        # One request at a time per user passes the quota check (the row lock orders them).
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        latest = submission.reverifications.first()
        if latest is not None and not latest.is_finished:
            raise ReverificationError(
                f"Submission {submission.pk} is already being re-verified.", code="already_open"
            )
        result = submission.latest_evaluation
        if result is None or not result.timing_held:
            raise ReverificationError(
                "Only a result held because its timing did not reproduce (or was not confirmed) "
                "can be re-verified on request.",
                code="not_held",
            )
        reverify_quota_check(user=user)
        reverification = reverification_request(
            submission=submission, reason=Reverification.Reason.OWNER, requested_by=user
        )
        _publish_created(submission)  # its page and followers see it pending again
    return reverification


def enqueue_once(row, *, task: str) -> bool:
    """Hand a queued re-verification or Nsight Compute report to its hardware's queue, once: the
    conditional update on enqueued_at keeps sweeps in several runners from queueing it twice. A
    broker that is down unmarks it, and the next sweep tries again."""
    model = type(row)
    marked = model.objects.filter(
        pk=row.pk, status=leases.QUEUED, enqueued_at__isnull=True
    ).update(enqueued_at=timezone.now())
    if not marked:
        return False
    try:
        async_task(task, row.pk, cluster=row.submission.hardware.queue_name,
                   task_name=f"{task.rsplit('.', 1)[-1]}-{row.pk}")
    except Exception:
        log.exception("could not enqueue %s %s", model.__name__, row.pk)
        model.objects.filter(pk=row.pk).update(enqueued_at=None)
        return False
    return True


def enqueue_reverification(reverification: Reverification) -> bool:
    return enqueue_once(reverification, task="gpu_runner.tasks.reverify")


# ---- Nsight Compute reports ----------------------------------------------------------------------


class NcuRequestError(Exception):
    def __init__(self, message: str, *, code: str = "invalid") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def ncu_report_request(*, user, submission: Submission) -> NcuReport:
    """Queue an Nsight Compute report on the submission's kernels, for its owner or staff.

    NcuRequestError when the user may not ask, the submission has not been evaluated yet, or a
    report is already queued or running; QuotaExceeded past the daily quota. The task goes to the
    submission's hardware queue after the commit; a runner without ncu answers "unavailable".
    """
    if not (user.is_staff or (submission.user_id and submission.user_id == user.pk)):
        raise NcuRequestError("Only the submission's owner and staff can ask for a profile.",
                              code="forbidden")
    if submission.status != Submission.Status.FINISHED:
        raise NcuRequestError(f"Submission {submission.pk} has not been evaluated yet.",
                              code="not_evaluated")
    with transaction.atomic():
        # One request at a time per user passes the quota check (the row lock orders them).
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        ncu_quota_check(user=user)
        try:
            with transaction.atomic():
                report = NcuReport.objects.create(submission=submission, requested_by=user)
        except IntegrityError:  # one_open_ncu_report
            raise NcuRequestError(
                f"A report on submission {submission.pk} is already queued or running.",
                code="already_open",
            ) from None
        transaction.on_commit(lambda: enqueue_ncu_report(report), robust=True)
    return report


def enqueue_ncu_report(report: NcuReport) -> bool:
    return enqueue_once(report, task="gpu_runner.tasks.ncu_report")
