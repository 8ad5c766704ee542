import hashlib
import re
from datetime import datetime

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from evaluation import leases
from evaluation.models import Hardware


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


# A slug as problems.services.problem_upsert makes it: "level<level>/<number>_<name>".
SLUG = re.compile(r"level(?P<level>[0-9]+)/(?P<name>[^/]+)")


def url_args(*, slug: str, level: int, number: int) -> list:
    """The (level, name) arguments of a problem's routes (`level<int:level>/<str:name>/`): its
    slug split at the slash, which is what links show. A slug of another form (one edited by
    hand in the admin) is not a route's two parts, so such a problem is named by its level and
    number there instead, which the same route takes (problems.selectors.problem_by_name)."""
    match = SLUG.fullmatch(slug)
    if match is not None:
        return [int(match["level"]), match["name"]]
    return [level, str(number)]


class PublishRefused(Exception):
    """Publishing was refused: the latest validation found problems and no reason overrides them."""

    def __init__(self, problem: "Problem", findings: list[dict]) -> None:
        self.problem = problem
        self.findings = findings
        codes = ", ".join(sorted({str(f.get("code")) for f in findings}))
        super().__init__(
            f"{problem.slug} has validation findings ({codes}); give a reason to override them"
        )


class Tag(models.Model):
    name = models.SlugField(max_length=64, unique=True)

    def __str__(self) -> str:
        return self.name


class ProblemQuerySet(models.QuerySet):
    """Who may see a problem and who may submit to it: the one rule, for pages, the API, the
    form, competitions and submission_create alike.

    Staff see every problem and submit to any but a retired one (curation tries drafts).
    Everyone else sees the listed ones (published, and retired for the record) and submits to
    published ones only: a draft or held problem is under curation, and its reference may not
    even run (a held one was flagged by a validation), so it is as if it did not exist.
    """

    def visible_to(self, user):
        if _is_staff(user):
            return self.all()
        return self.filter(status__in=Problem.LISTED)

    def open_for_submissions(self, user):
        if user is None or _is_staff(user):
            return self.exclude(status=Problem.Status.RETIRED)
        return self.filter(status__in=Problem.OPEN)


def _is_staff(user) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_staff)


class Problem(models.Model):
    """One reference program in KernelBench's format (`Model`, `get_inputs`, `get_init_inputs`).

    The current reference lives in `current_version`; every change of the reference makes a new
    ProblemVersion so evaluations keep pointing at the code they ran against.
    """

    class Status(models.TextChoices):
        DRAFT = "draft"
        VALIDATED = "validated"
        PUBLISHED = "published"
        # Published, then flagged by a validation (a constant or input-insensitive output, a
        # reference that fails): off the lists and boards until an admin publishes it with a
        # reason, fixes it, or retires it.
        HELD = "held", "held: validation findings"
        RETIRED = "retired"

    class Precision(models.TextChoices):
        FP32 = "fp32"
        FP16 = "fp16"
        BF16 = "bf16"

    class CodeVisibility(models.TextChoices):
        OWNER = "owner", "owner and admins"
        PUBLIC = "public", "everyone"
        AFTER_DATE = "after_date", "everyone after a date"

    # What everyone sees, and what everyone may submit to (ProblemQuerySet, the one rule).
    LISTED = (Status.PUBLISHED, Status.RETIRED)
    OPEN = (Status.PUBLISHED,)

    slug = models.CharField(max_length=200, unique=True)  # "level1/19_ReLU"
    level = models.PositiveSmallIntegerField(db_index=True)
    number = models.PositiveIntegerField()
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    precision = models.CharField(max_length=8, choices=Precision, default=Precision.FP32)
    # Per-problem tolerance overrides; None means the evaluator's default for the precision.
    atol = models.FloatField(null=True, blank=True)
    rtol = models.FloatField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status, default=Status.DRAFT, db_index=True)
    tags = models.ManyToManyField(Tag, blank=True, related_name="problems")
    current_version = models.ForeignKey(
        "ProblemVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    code_visibility = models.CharField(
        max_length=16, choices=CodeVisibility, default=CodeVisibility.PUBLIC
    )
    code_visible_after = models.DateTimeField(null=True, blank=True)
    # An admin may publish despite validation findings, with a reason kept for the record.
    findings_override_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ProblemQuerySet.as_manager()

    class Meta:
        ordering = ["level", "number"]
        constraints = [
            models.UniqueConstraint(fields=["level", "number"], name="unique_problem_level_number")
        ]

    def __str__(self) -> str:
        return self.slug

    def get_absolute_url(self) -> str:
        return reverse("problem_detail", args=self.url_args)

    @property
    def url_args(self) -> list:
        """The arguments of this problem's routes: its slug's level and name (url_args)."""
        return url_args(slug=self.slug, level=self.level, number=self.number)

    @property
    def source(self) -> str:
        return self.current_version.source if self.current_version else ""

    @property
    def is_open_for_submissions(self) -> bool:
        return self.status != self.Status.RETIRED

    def reference_visible_to(self, user) -> bool:
        """The reference's source: staff, else everyone once its code is public. Pages, the API
        and the submit form's starter all ask here."""
        return _is_staff(user) or (self.is_visible_to(user) and self.code_is_public())

    def is_visible_to(self, user) -> bool:
        """ProblemQuerySet.visible_to for this one row."""
        return _is_staff(user) or self.status in self.LISTED

    def takes_submissions_from(self, user) -> bool:
        """ProblemQuerySet.open_for_submissions for this one row. No user is the site itself: a
        model run's samples (runs are started by staff only)."""
        if user is None or _is_staff(user):
            return self.status != self.Status.RETIRED
        return self.status in self.OPEN

    def code_is_public(self, now=None) -> bool:
        now = now or timezone.now()
        if self.code_visibility == self.CodeVisibility.PUBLIC:
            return True
        if self.code_visibility == self.CodeVisibility.AFTER_DATE:
            return self.code_visible_after is not None and now >= self.code_visible_after
        return False

    def latest_validations(self) -> list:
        """The latest finished validation of the current version on each hardware."""
        if self.current_version_id is None:
            return []
        latest: dict[int, object] = {}
        finished = self.current_version.validations.filter(
            status__in=["passed", "flagged", "failed"]
        ).order_by("-finished_at", "-pk")
        for validation in finished:
            latest.setdefault(validation.hardware_id, validation)
        return list(latest.values())

    def open_findings(self) -> list[dict]:
        """Findings of the latest validations of the current version (what blocks publishing)."""
        return [finding for v in self.latest_validations() for finding in v.findings]

    def publish(self, *, override_reason: str = "") -> None:
        """Publish; refused while the latest validation has findings, unless a reason is given."""
        findings = self.open_findings()
        override_reason = override_reason.strip()
        if findings and not override_reason:
            raise PublishRefused(self, findings)
        self.status = self.Status.PUBLISHED
        fields = ["status", "updated_at"]
        if findings:
            self.findings_override_reason = override_reason
            fields.append("findings_override_reason")
        self.save(update_fields=fields)

    def hold_for_findings(self) -> bool:
        """Published, with findings and no admin's reason to override them -> held. True when
        this call held it."""
        if self.status != self.Status.PUBLISHED or self.findings_override_reason:
            return False
        if not self.open_findings():
            return False
        self.status = self.Status.HELD
        self.save(update_fields=["status", "updated_at"])
        return True

    def retire(self) -> None:
        """Closed to new submissions and off the active boards; versions and results stay."""
        self.status = self.Status.RETIRED
        self.save(update_fields=["status", "updated_at"])

    def mark_validated(self) -> None:
        """A draft whose current version passed validation; other states are left alone."""
        if self.status == self.Status.DRAFT:
            self.status = self.Status.VALIDATED
            self.save(update_fields=["status", "updated_at"])

    def set_current_version(self, version: "ProblemVersion") -> None:
        """A new reference: a validation of the old one no longer vouches for it."""
        self.current_version = version
        fields = ["current_version", "updated_at"]
        if self.status == self.Status.VALIDATED:
            self.status = self.Status.DRAFT
            fields.append("status")
        self.save(update_fields=fields)


class ProblemVersion(models.Model):
    problem = models.ForeignKey(Problem, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    source = models.TextField()
    source_hash = models.CharField(max_length=64, db_index=True)
    origin = models.CharField(max_length=300, blank=True)  # file or dataset row it came from
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["problem", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["problem", "version"], name="unique_problem_version")
        ]

    def __str__(self) -> str:
        return f"{self.problem.slug} v{self.version}"


class Baseline(models.Model):
    """The reference's timing for a problem on a hardware, eager or with torch.compile."""

    class Mode(models.TextChoices):
        EAGER = "eager"
        COMPILE = "compile"

    problem = models.ForeignKey(
        Problem, on_delete=models.CASCADE, related_name="baselines"
    )
    problem_version = models.ForeignKey(
        ProblemVersion, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    hardware = models.ForeignKey(Hardware, on_delete=models.CASCADE, related_name="baselines")
    mode = models.CharField(max_length=16, choices=Mode)
    median_ms = models.FloatField()
    stats = models.JSONField(default=dict, blank=True)  # mean, std, min, max, n
    torch_version = models.CharField(max_length=64, blank=True)
    source = models.CharField(max_length=64, default="measured")  # or "imported"
    # What it was measured on (device name, CUDA, compile time...), for the record.
    environment = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "evaluation_baseline"  # moved from the evaluation app; the table stays
        constraints = [
            models.UniqueConstraint(
                fields=["problem", "hardware", "mode"], name="unique_baseline_per_mode"
            )
        ]

    def __str__(self) -> str:
        return f"{self.problem} on {self.hardware} ({self.mode}): {self.median_ms:.4g} ms"


class Validation(models.Model):
    """A curation check of a problem's reference on a hardware (runs on a runner, like kernels).

    queued -> running (claimed by one runner, on a lease: evaluation/leases.py) -> passed,
    flagged (findings) or failed (the reference did not run, or killed its runners every time;
    that is a finding too). Findings block publishing until an admin overrides them with a reason.
    """

    LEASE_HOLDER_FIELD = "runner_name"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        PASSED = "passed"
        FLAGGED = "flagged"
        FAILED = "failed"

    FINISHED = (Status.PASSED, Status.FLAGGED, Status.FAILED)

    problem_version = models.ForeignKey(
        ProblemVersion, on_delete=models.CASCADE, related_name="validations"
    )
    hardware = models.ForeignKey(Hardware, on_delete=models.CASCADE, related_name="validations")
    status = models.CharField(max_length=16, choices=Status, default=Status.QUEUED)
    # [{"code": "constant_output", "message": "plain explanation"}]
    findings = models.JSONField(default=list, blank=True)
    peak_memory_bytes = models.BigIntegerField(null=True, blank=True)
    reference_ms = models.FloatField(null=True, blank=True)
    details = models.JSONField(default=dict, blank=True)  # per-check figures, notes, seed
    error = models.TextField(blank=True)
    environment = models.JSONField(default=dict, blank=True)
    runner_name = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "evaluation_validation"  # moved from the evaluation app; the table stays
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"validation of {self.problem_version} on {self.hardware}: {self.status}"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    def claim(self, *, runner_name: str, lease_seconds: float) -> bool:
        """Queued (or running on a lapsed lease: its runner died) -> running; one runner wins."""
        return leases.claim(self, runner_name=runner_name, lease_seconds=lease_seconds)

    def extend_lease(self, *, runner_name: str, lease_seconds: float) -> None:
        leases.extend(self, runner_name=runner_name, lease_seconds=lease_seconds)

    def finish(
        self,
        *,
        runner_name: str,
        findings: list[dict],
        failed: bool = False,
        peak_memory_bytes: int | None = None,
        reference_ms: float | None = None,
        details: dict | None = None,
        error: str = "",
        environment: dict | None = None,
    ) -> bool:
        """Running by `runner_name` -> passed, flagged or failed. False when that runner no
        longer holds the lease (it was presumed dead and another took over): the other result
        stands, and this one is dropped."""
        fields = self._outcome(
            findings=findings, failed=failed, peak_memory_bytes=peak_memory_bytes,
            reference_ms=reference_ms, details=details, error=error, environment=environment,
        )
        if not leases.finish(self, runner_name=runner_name, finished_at=timezone.now(), **fields):
            return False
        self.refresh_from_db()
        return True

    def record(
        self,
        *,
        findings: list[dict],
        failed: bool = False,
        peak_memory_bytes: int | None = None,
        reference_ms: float | None = None,
        details: dict | None = None,
        error: str = "",
        environment: dict | None = None,
        finished_at: datetime | None = None,
    ) -> None:
        """A result measured elsewhere (a curation import), on a row no runner ever leased.
        finished_at: when it was measured, where that was not now."""
        fields = self._outcome(
            findings=findings, failed=failed, peak_memory_bytes=peak_memory_bytes,
            reference_ms=reference_ms, details=details, error=error, environment=environment,
        )
        for name, value in fields.items():
            setattr(self, name, value)
        self.finished_at = finished_at or timezone.now()
        self.lease_expires_at = None
        self.save()

    @classmethod
    def _outcome(
        cls, *, findings, failed, peak_memory_bytes, reference_ms, details, error, environment
    ) -> dict:
        if failed:
            status = cls.Status.FAILED
        else:
            status = cls.Status.FLAGGED if findings else cls.Status.PASSED
        return {
            "status": status,
            "findings": findings,
            "peak_memory_bytes": peak_memory_bytes,
            "reference_ms": reference_ms,
            "details": details or {},
            "error": error,
            "environment": environment or {},
        }
