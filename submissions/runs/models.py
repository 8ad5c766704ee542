"""Model runs' rows: the models, their runs, each call to a model (Generation) and each sample's
result as the run's tables count it (RunSample).

Registered under the app label `submissions` (submissions/models.py imports them), so their tables
and migrations are the submissions app's. A run's submissions point back at it: the relations
to submissions' models are named by string here, since submissions/models.py imports this module.
"""

from django.conf import settings
from django.db import models
from django.utils import timezone


class Model(models.Model):
    """A language model known to litellm by `litellm_name`; keys come from the environment."""

    litellm_name = models.CharField(max_length=200, unique=True)  # "openai/gpt-4o"
    display_name = models.CharField(max_length=200, blank=True)
    # Names of environment variables to pass to litellm (never the values).
    api_key_env = models.CharField(max_length=100, blank=True)
    api_base_env = models.CharField(max_length=100, blank=True)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["litellm_name"]

    def __str__(self) -> str:
        return self.display_name or self.litellm_name


class Run(models.Model):
    """A model generating kernels over a set of problems; each sample becomes a submission."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        STOPPED = "stopped"
        FINISHED = "finished"

    class PromptStyle(models.TextChoices):
        ONE_SHOT = "one_shot", "KernelBench one-shot example"
        TRITON = "triton", "Triton one-shot example"

    name = models.CharField(max_length=200)
    model = models.ForeignKey(Model, on_delete=models.PROTECT, related_name="runs")
    problems = models.ManyToManyField("problems.Problem", blank=True, related_name="runs")
    backend = models.CharField(max_length=16, default="cuda")
    hardware = models.ForeignKey(
        "evaluation.Hardware", on_delete=models.PROTECT, related_name="runs"
    )
    precision = models.CharField(max_length=8, default="fp32")
    samples_per_problem = models.PositiveSmallIntegerField(default=1)
    temperature = models.FloatField(default=0.0)
    prompt_style = models.CharField(
        max_length=16, choices=PromptStyle, default=PromptStyle.ONE_SHOT
    )
    refinement_turns = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status, default=Status.PENDING)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.model})"


class Generation(models.Model):
    """One call to a model in a run: the prompt, the answer, what it cost, the code it gave."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        NO_CODE = "no_code"  # answered, but with no code block: recorded, not dropped
        FAILED = "failed"  # the provider kept failing after retries

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="generations")
    problem = models.ForeignKey("problems.Problem", on_delete=models.PROTECT, related_name="+")
    sample_index = models.PositiveSmallIntegerField(default=0)
    turn = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status, default=Status.PENDING)
    prompt = models.TextField(blank=True)
    response = models.TextField(blank=True)
    error = models.TextField(blank=True)
    submission = models.OneToOneField(
        "submissions.Submission",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="generation",
    )
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "problem", "sample_index", "turn"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "problem", "sample_index", "turn"], name="unique_generation_step"
            )
        ]

    def __str__(self) -> str:
        return f"{self.run} {self.problem_id} sample {self.sample_index} turn {self.turn}"


class RunSample(models.Model):
    """One sample of a run (a problem and a sample index) as the run's tables count it: its
    result, the best of its submissions' (a sample refined over several turns has several;
    scoring.best_of_key picks), by either counting (scoring.COUNTINGS). Kept as the sample's
    results land (samples.run_sample_refresh), so that a run's tables read a row a sample, never
    every evaluation of the run. A sample with no result yet has none."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="sample_results")
    problem = models.ForeignKey("problems.Problem", on_delete=models.CASCADE, related_name="+")
    sample_index = models.PositiveSmallIntegerField()
    evaluation = models.ForeignKey(
        "submissions.Evaluation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    compiled = models.BooleanField(default=False)
    # Ours (scoring.on_board), with the speedups as it counts them (scoring.counted_speedup).
    correct = models.BooleanField(default=False)
    speedup_eager = models.FloatField(null=True, blank=True)
    speedup_compile = models.FloatField(null=True, blank=True)
    # KernelBench's counting of the same result.
    kernelbench_correct = models.BooleanField(default=False)
    kernelbench_speedup_eager = models.FloatField(null=True, blank=True)
    kernelbench_speedup_compile = models.FloatField(null=True, blank=True)
    # Its submissions (one a turn) whose result is on the board: the run page's "correct".
    correct_submissions = models.PositiveSmallIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "problem", "sample_index"], name="unique_run_sample"
            )
        ]

    def __str__(self) -> str:
        return f"{self.run} {self.problem_id} sample {self.sample_index}: {self.correct}"
