import hashlib

from django.db import models
from django.urls import reverse
from django.utils import timezone


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


class Tag(models.Model):
    name = models.SlugField(max_length=64, unique=True)

    def __str__(self) -> str:
        return self.name


class Problem(models.Model):
    """One reference program in KernelBench's format (`Model`, `get_inputs`, `get_init_inputs`).

    The current reference lives in `current_version`; every change of the reference makes a new
    ProblemVersion so evaluations keep pointing at the code they ran against.
    """

    class Status(models.TextChoices):
        DRAFT = "draft"
        VALIDATED = "validated"
        PUBLISHED = "published"
        RETIRED = "retired"

    class Precision(models.TextChoices):
        FP32 = "fp32"
        FP16 = "fp16"
        BF16 = "bf16"

    class CodeVisibility(models.TextChoices):
        OWNER = "owner", "owner and admins"
        PUBLIC = "public", "everyone"
        AFTER_DATE = "after_date", "everyone after a date"

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

    class Meta:
        ordering = ["level", "number"]
        constraints = [
            models.UniqueConstraint(fields=["level", "number"], name="unique_problem_level_number")
        ]

    def __str__(self) -> str:
        return self.slug

    def get_absolute_url(self) -> str:
        return reverse("problem_detail", args=[self.level, self.number])

    @property
    def source(self) -> str:
        return self.current_version.source if self.current_version else ""

    @property
    def is_open_for_submissions(self) -> bool:
        return self.status != self.Status.RETIRED

    def code_is_public(self, now=None) -> bool:
        now = now or timezone.now()
        if self.code_visibility == self.CodeVisibility.PUBLIC:
            return True
        if self.code_visibility == self.CodeVisibility.AFTER_DATE:
            return self.code_visible_after is not None and now >= self.code_visible_after
        return False

    def publish(self) -> None:
        self.status = self.Status.PUBLISHED
        self.save(update_fields=["status", "updated_at"])

    def retire(self) -> None:
        self.status = self.Status.RETIRED
        self.save(update_fields=["status", "updated_at"])


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
