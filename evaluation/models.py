from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from evaluation import leases, scoring
from evaluation.harness import verdicts


class Hardware(models.Model):
    """A kind of device that runners serve; its slug is also the name of its django-q2 queue."""

    class Kind(models.TextChoices):
        CPU = "cpu"
        GPU = "gpu"

    slug = models.SlugField(max_length=64, unique=True)  # "h200", "cpu"
    name = models.CharField(max_length=200, blank=True)  # "NVIDIA H200"
    kind = models.CharField(max_length=8, choices=Kind, default=Kind.GPU)
    arch = models.CharField(max_length=32, blank=True)  # "sm_90"
    memory_bytes = models.BigIntegerField(null=True, blank=True)
    gpu_count = models.PositiveSmallIntegerField(default=0)
    driver_version = models.CharField(max_length=64, blank=True)
    torch_version = models.CharField(max_length=64, blank=True)
    cuda_version = models.CharField(max_length=64, blank=True)
    triton_version = models.CharField(max_length=64, blank=True)
    # Speed of light: peak memory bandwidth (GB/s) and peak rates (TFLOP/s) by dtype.
    peak_bandwidth_gbs = models.FloatField(null=True, blank=True)
    peak_tflops = models.JSONField(default=dict, blank=True)
    detected = models.JSONField(default=dict, blank=True)
    backends = models.JSONField(default=list, blank=True)  # what its runners can evaluate
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        verbose_name_plural = "hardware"

    def __str__(self) -> str:
        return self.slug

    @property
    def queue_name(self) -> str:
        return self.slug

    def online_runners(self):
        return self.runners.filter(last_seen__gte=Runner.online_since())


class Runner(models.Model):
    """One runner process serving one device of a hardware; its heartbeat says it is alive."""

    name = models.CharField(max_length=200, unique=True)  # host:pid or host:gpuN
    hardware = models.ForeignKey(Hardware, on_delete=models.CASCADE, related_name="runners")
    host = models.CharField(max_length=200, blank=True)
    pid = models.IntegerField(null=True, blank=True)
    device_index = models.IntegerField(null=True, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now, db_index=True)
    current_submission_id = models.BigIntegerField(null=True, blank=True)
    evaluations_done = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["hardware", "name"]

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def online_since():
        return timezone.now() - timedelta(seconds=settings.RUNNER_OFFLINE_AFTER_SECONDS)

    @property
    def is_online(self) -> bool:
        return self.last_seen >= self.online_since()


class Baseline(models.Model):
    """The reference's timing for a problem on a hardware, eager or with torch.compile."""

    class Mode(models.TextChoices):
        EAGER = "eager"
        COMPILE = "compile"

    problem = models.ForeignKey(
        "problems.Problem", on_delete=models.CASCADE, related_name="baselines"
    )
    problem_version = models.ForeignKey(
        "problems.ProblemVersion", null=True, blank=True, on_delete=models.SET_NULL,
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
        constraints = [
            models.UniqueConstraint(
                fields=["problem", "hardware", "mode"], name="unique_baseline_per_mode"
            )
        ]

    def __str__(self) -> str:
        return f"{self.problem} on {self.hardware} ({self.mode}): {self.median_ms:.4g} ms"


class Evaluation(models.Model):
    """One evaluation of a submission on a hardware: what the evaluator found, reproducibly."""

    # One member per verdict of evaluation/harness/verdicts.py (CORRECT = "correct", ...).
    Verdict = models.TextChoices("Verdict", [(name.upper(), name) for name in verdicts.VERDICTS])

    class Purpose(models.TextChoices):
        SUBMISSION = "submission"
        REVERIFY = "reverify"

    submission = models.ForeignKey(
        "submissions.Submission", on_delete=models.CASCADE, related_name="evaluations"
    )
    attempt = models.PositiveSmallIntegerField(default=1)
    purpose = models.CharField(max_length=16, choices=Purpose, default=Purpose.SUBMISSION)
    hardware = models.ForeignKey(Hardware, on_delete=models.PROTECT, related_name="evaluations")
    problem_version = models.ForeignKey(
        "problems.ProblemVersion", on_delete=models.PROTECT, related_name="evaluations"
    )
    runner_name = models.CharField(max_length=200, blank=True)
    verdict = models.CharField(max_length=32, choices=Verdict, db_index=True)
    correct = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    traceback = models.TextField(blank=True)
    compile_log = models.TextField(blank=True)
    logs = models.TextField(blank=True)
    trials = models.JSONField(default=list, blank=True)
    candidate_stats = models.JSONField(null=True, blank=True)
    reference_stats = models.JSONField(null=True, blank=True)
    candidate_median_ms = models.FloatField(null=True, blank=True)
    reference_median_ms = models.FloatField(null=True, blank=True)
    speedup = models.FloatField(null=True, blank=True)  # reference / candidate, side by side
    speedup_eager = models.FloatField(null=True, blank=True)  # over the stored eager baseline
    speedup_compile = models.FloatField(null=True, blank=True)  # over torch.compile's baseline
    flags = models.JSONField(default=list, blank=True)
    static_report = models.JSONField(default=dict, blank=True)
    environment = models.JSONField(default=dict, blank=True)
    seeds = models.JSONField(default=dict, blank=True)
    phases = models.JSONField(default=dict, blank=True)
    source_hash = models.CharField(max_length=64)
    evaluator_version = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-finished_at"]
        constraints = [
            # A redelivered task can never store a second evaluation for the same attempt.
            models.UniqueConstraint(
                fields=["submission", "purpose", "attempt"], name="unique_evaluation_attempt"
            )
        ]

    def __str__(self) -> str:
        return f"evaluation of submission {self.submission_id}: {self.verdict}"

    @property
    def ranks(self) -> bool:
        """Correct, unflagged and timed (evaluation/scoring.py, the one rule)."""
        return scoring.ranks(
            {"correct": self.correct, "flags": self.flags,
             "candidate_median_ms": self.candidate_median_ms}
        )


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
        "problems.ProblemVersion", on_delete=models.CASCADE, related_name="validations"
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
        findings: list[dict],
        failed: bool = False,
        peak_memory_bytes: int | None = None,
        reference_ms: float | None = None,
        details: dict | None = None,
        error: str = "",
        environment: dict | None = None,
    ) -> None:
        if failed:
            self.status = self.Status.FAILED
        else:
            self.status = self.Status.FLAGGED if findings else self.Status.PASSED
        self.findings = findings
        self.peak_memory_bytes = peak_memory_bytes
        self.reference_ms = reference_ms
        self.details = details or {}
        self.error = error
        self.environment = environment or {}
        self.finished_at = timezone.now()
        self.lease_expires_at = None
        self.save()
