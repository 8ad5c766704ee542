"""Board state kept up to date as results land, so reading a board never scans all evaluations.

A board is one (problem, hardware, precision): a result ranks on the board of the precision it
was judged in (evaluation.scoring.board_precision), and the problem's own precision is its main
board (scoring.is_main_board); the others are boards of their own, labelled. One BestEntry per
(board, participant) summarises that participant's evaluations there: the best ranking one
(correct, no exploit flag, not held for re-verification), the best flagged one, the best one
pending re-verification, and whether any compiled. A Record is written each time a board's
fastest time improves.
"""

from django.conf import settings
from django.db import models
from django.db.models import F
from django.utils import timezone


def main_boards(rows):
    """Rows of boards (a queryset of entries, records or board summaries, the historical
    models' in a migration too) that are on their problem's main board: of the problem's own
    precision (evaluation.scoring.is_main_board, in SQL)."""
    return rows.filter(precision=F("problem__precision"))


class BoardQuerySet(models.QuerySet):
    """Rows of boards (entries, records, board summaries), each with its problem and precision."""

    def main_boards(self):
        return main_boards(self)


class BestEntry(models.Model):
    problem = models.ForeignKey(
        "problems.Problem", on_delete=models.CASCADE, related_name="best_entries"
    )
    hardware = models.ForeignKey(
        "evaluation.Hardware", on_delete=models.CASCADE, related_name="best_entries"
    )
    participant = models.CharField(max_length=64)  # Submission.participant: "user:3", "model:5"
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    model = models.ForeignKey(
        "submissions.Model", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # The best ranking evaluation; null when the participant has none (then it is not ranked).
    evaluation = models.ForeignKey(
        "submissions.Evaluation", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    submission = models.ForeignKey(
        "submissions.Submission", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    rank = models.PositiveIntegerField(null=True, blank=True)
    candidate_median_ms = models.FloatField(null=True, blank=True)
    reference_median_ms = models.FloatField(null=True, blank=True)
    speedup = models.FloatField(null=True, blank=True)
    speedup_eager = models.FloatField(null=True, blank=True)
    speedup_compile = models.FloatField(null=True, blank=True)
    backend = models.CharField(max_length=16, blank=True)
    # The board's precision (scoring.board_precision of every evaluation it summarises).
    precision = models.CharField(max_length=8)
    achieved_at = models.DateTimeField(null=True, blank=True)
    # The fastest flagged evaluation, shown apart from the ranking with its flags.
    flagged_evaluation = models.ForeignKey(
        "submissions.Evaluation", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    flags = models.JSONField(default=list, blank=True)
    flagged_ms = models.FloatField(null=True, blank=True)
    flagged_at = models.DateTimeField(null=True, blank=True)
    # The fastest result held off the ranking until its re-verification passes (a new record).
    pending_evaluation = models.ForeignKey(
        "submissions.Evaluation", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    compiled = models.BooleanField(default=False)  # any evaluation got past compilation
    evaluated = models.PositiveIntegerField(default=0)  # submissions with an evaluation here
    updated_at = models.DateTimeField(default=timezone.now)

    objects = BoardQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["problem", "hardware", "precision", "participant"],
                name="unique_best_entry",
            )
        ]
        indexes = [
            models.Index(
                fields=["problem", "hardware", "precision", "rank"], name="best_entry_board"
            ),
            models.Index(fields=["model", "hardware"], name="best_entry_model"),
            models.Index(fields=["user", "hardware"], name="best_entry_user"),
            # Covers the busiest-problems count, so it reads no table rows.
            models.Index(fields=["problem", "evaluated", "rank"], name="best_entry_activity"),
        ]
        verbose_name_plural = "best entries"

    def __str__(self) -> str:
        return (f"{self.participant} on {self.problem_id}/{self.hardware_id}/{self.precision}: "
                f"rank {self.rank}")

    @property
    def is_ranked(self) -> bool:
        return self.evaluation_id is not None



class BoardSummary(models.Model):
    """A board's counts (problem x hardware x precision): its participants, its ranked kernels
    and its evaluated submissions, kept as its entries change (services.board_rerank), so that
    the leaderboards index, the busiest problems, the default hardware and the list of a
    problem's boards read a row a board, never every entry. A board with no entry has none."""

    problem = models.ForeignKey("problems.Problem", on_delete=models.CASCADE, related_name="+")
    hardware = models.ForeignKey(
        "evaluation.Hardware", on_delete=models.CASCADE, related_name="+"
    )
    precision = models.CharField(max_length=8)
    participants = models.PositiveIntegerField(default=0)
    ranked = models.PositiveIntegerField(default=0)
    evaluated = models.PositiveIntegerField(default=0)  # the sum of its entries' `evaluated`

    objects = BoardQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["problem", "hardware", "precision"], name="unique_board_summary"
            )
        ]
        verbose_name_plural = "board summaries"

    def __str__(self) -> str:
        return (f"board {self.problem_id}/{self.hardware_id}/{self.precision}: "
                f"{self.participants} participants")


class Record(models.Model):
    """A new fastest time on a board: the history behind its record plot."""

    problem = models.ForeignKey(
        "problems.Problem", on_delete=models.CASCADE, related_name="records"
    )
    hardware = models.ForeignKey(
        "evaluation.Hardware", on_delete=models.CASCADE, related_name="records"
    )
    precision = models.CharField(max_length=8)  # the board's
    participant = models.CharField(max_length=64)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    model = models.ForeignKey(
        "submissions.Model", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    evaluation = models.ForeignKey(
        "submissions.Evaluation", on_delete=models.CASCADE, related_name="+"
    )
    submission = models.ForeignKey(
        "submissions.Submission", on_delete=models.CASCADE, related_name="+"
    )
    candidate_median_ms = models.FloatField()
    previous_ms = models.FloatField(null=True, blank=True)
    speedup = models.FloatField(null=True, blank=True)
    achieved_at = models.DateTimeField(db_index=True)

    objects = BoardQuerySet.as_manager()

    class Meta:
        ordering = ["-achieved_at"]
        indexes = [
            models.Index(
                fields=["problem", "hardware", "precision", "achieved_at"], name="record_board"
            ),
        ]

    def __str__(self) -> str:
        return (f"record on {self.problem_id}/{self.hardware_id}/{self.precision}: "
                f"{self.candidate_median_ms} ms")


class ParticipantSummary(models.Model):
    """One participant's row of the people's or the models' table: its best entries on the
    main boards (each problem's own precision) of the published problems of one level on one
    hardware, counted (metrics.level_summary's
    numerators) and kept as each of those entries changes (services.summary_refresh), so that
    a table reads a row a participant, never every entry.

    The rates are these counts over the level's published problems, divided when the table is
    read: a problem published with no entries changes only that. A problem with entries that is
    published, held or retired has its participants' summaries refreshed then (apps.py).
    """

    participant = models.CharField(max_length=64)  # as BestEntry.participant
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    model = models.ForeignKey(
        "submissions.Model", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    hardware = models.ForeignKey(
        "evaluation.Hardware", on_delete=models.CASCADE, related_name="+"
    )
    level = models.PositiveSmallIntegerField()
    attempted = models.PositiveIntegerField(default=0)  # problems with an entry
    compiled = models.PositiveIntegerField(default=0)
    correct = models.PositiveIntegerField(default=0)  # problems with a ranked kernel
    # Per baseline (scoring.BASELINES): {p: correct problems faster than p} for each fast_p
    # threshold (keyed as selectors.p_label writes it), and the geometric mean speedup of the
    # correct ones.
    fast_eager = models.JSONField(default=dict)
    fast_compile = models.JSONField(default=dict)
    geomean_eager = models.FloatField(null=True, blank=True)
    geomean_compile = models.FloatField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["participant", "hardware", "level"], name="unique_participant_summary"
            )
        ]
        verbose_name_plural = "participant summaries"

    def __str__(self) -> str:
        return f"{self.participant} on {self.hardware_id}, level {self.level}: {self.correct}"
