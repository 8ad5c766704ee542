from datetime import timedelta

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone


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
        """Its django-q2 queue (cluster name): every enqueue, sweep and runner names it here."""
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


class AccountWeight(models.Model):
    """An account's share of the runners (evaluation/fairness.py): it takes `weight` turns for
    every one of an account without a row here (weight 1). Set by an operator in the admin: a
    lab's RL account (a competition's entries while it runs have a weight of their own:
    Competition.queue_weight, their own lane in the rule)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="fair_share_weight"
    )
    weight = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Turns this account takes for each turn of an ordinary account (1).",
    )
    note = models.CharField(max_length=200, blank=True, help_text="Why, for the next operator.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["user"]

    def __str__(self) -> str:
        return f"{self.user} x{self.weight}"
