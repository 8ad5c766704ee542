from datetime import timedelta

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone

from submissions.models import Submission


class Competition(models.Model):
    """A problem set judged on one hardware between two times, curated by admins.

    Before `starts_at` nothing can be entered; until `ends_at` entries rank; after it they are
    still evaluated and shown as "after the deadline", never ranked. Once every on-time entry is
    evaluated after the end, the standings are frozen: kept as they were (`final_standings`),
    whatever later re-verifications find.
    """

    class Phase(models.TextChoices):
        UPCOMING = "upcoming"
        RUNNING = "running"
        ENDED = "ended"

    slug = models.SlugField(unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    problems = models.ManyToManyField("problems.Problem", related_name="competitions")
    hardware = models.ForeignKey(
        "evaluation.Hardware", on_delete=models.PROTECT, related_name="competitions"
    )
    # Allowed backends and precisions; empty allows every one the site offers.
    backends = models.JSONField(default=list, blank=True)
    precisions = models.JSONField(default=list, blank=True)
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    daily_limit = models.PositiveSmallIntegerField(
        default=20, help_text="Entries per person per UTC day."
    )
    # Read by the fair rule (evaluation/fairness.py) through submissions.queues.fair_sources.
    queue_weight = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="While it runs, each entrant's entries take this many turns on the runners for "
        "each turn of an ordinary account, apart from the entrant's other work. 1: entries wait "
        "like any other work.",
    )
    code_hidden = models.BooleanField(
        default=True, help_text="Entrants' code is hidden from others until the end."
    )
    published = models.BooleanField(default=False)
    frozen_at = models.DateTimeField(null=True, blank=True)
    final_standings = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-starts_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ends_at__gt=models.F("starts_at")),
                name="competition_ends_after_start",
            )
        ]

    def __str__(self) -> str:
        return self.title

    def save(self, *args, **kwargs) -> None:
        super().save(*args, **kwargs)
        fields = kwargs.get("update_fields")
        if fields is None or {"ends_at", "code_hidden"} & set(fields):
            self.code_hidden_sync()

    def get_absolute_url(self) -> str:
        return reverse("competition_detail", args=[self.slug])

    def code_hidden_sync(self) -> None:
        """Its on-time entries' code is hidden from others until its end, as each submission's
        code_hidden_until says (what the one visibility rule, can_see_source, reads): kept in
        step whenever the end moves or hiding is switched, so an extended competition never
        shows its entries' code at the end it had before."""
        Submission.objects.filter(
            competition_entry__competition=self, competition_entry__after_deadline=False
        ).update(code_hidden_until=self.ends_at if self.code_hidden else None)

    def phase(self, now=None) -> str:
        now = now or timezone.now()
        if now < self.starts_at:
            return self.Phase.UPCOMING
        if now < self.ends_at:
            return self.Phase.RUNNING
        return self.Phase.ENDED

    @property
    def is_frozen(self) -> bool:
        return self.frozen_at is not None

    def open_now(self) -> None:
        now = timezone.now()
        self.published = True
        self.starts_at = min(self.starts_at, now)
        if self.ends_at <= now:
            raise ValueError("it has already ended; move its end first")
        self.save(update_fields=["published", "starts_at"])

    def close_now(self) -> None:
        now = timezone.now()
        if now < self.ends_at:
            self.ends_at = now
            # Closed the moment it opened: it still ends after it starts.
            self.starts_at = min(self.starts_at, now - timedelta(seconds=1))
            self.save(update_fields=["starts_at", "ends_at"])

    def freeze(self, *, standings: list[dict]) -> None:
        self.final_standings = standings
        self.frozen_at = timezone.now()
        self.save(update_fields=["final_standings", "frozen_at"])


class Entry(models.Model):
    """A submission made to a competition."""

    competition = models.ForeignKey(Competition, on_delete=models.CASCADE, related_name="entries")
    submission = models.OneToOneField(
        "submissions.Submission", on_delete=models.CASCADE, related_name="competition_entry"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="competition_entries"
    )
    problem = models.ForeignKey("problems.Problem", on_delete=models.CASCADE, related_name="+")
    submitted_at = models.DateTimeField(default=timezone.now)
    after_deadline = models.BooleanField(default=False)

    class Meta:
        ordering = ["-submitted_at"]
        verbose_name_plural = "entries"
        indexes = [models.Index(fields=["competition", "user", "submitted_at"])]

    def __str__(self) -> str:
        return f"{self.user} in {self.competition}: submission {self.submission_id}"
