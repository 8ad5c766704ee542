from datetime import timedelta

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from evaluation import leases, scoring, stats
from evaluation.models import Hardware, Runner
from evaluator import flags as flag_kinds
from evaluator import verdicts

# Model runs live in submissions/runs/; importing their models here registers them under this
# app's label (their tables and migrations are the submissions app's).
from submissions.runs.models import Generation, Model, Run, RunSample  # noqa: F401


class Batch(models.Model):
    """Submissions sent in one request to the batch API: followed and cancelled together.

    Its status is read from its submissions (`status`), except that a batch cancelled as a
    whole says so: the rows of its submissions are what runners claim, so a status kept here
    would need every runner to write it as well."""

    class Status(models.TextChoices):
        QUEUED = "queued"  # every submission waiting
        RUNNING = "running"  # some evaluated or running, some still to come
        FINISHED = "finished"  # none waiting or running
        CANCELLED = "cancelled"  # cancelled as a whole, or every submission cancelled

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="batches",
    )
    created_at = models.DateTimeField(default=timezone.now)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "batches"

    def __str__(self) -> str:
        return f"batch {self.pk}"

    def counts(self) -> dict[str, int]:
        """How many of its submissions are in each status (every status named, 0 included)."""
        found = dict(
            self.submissions.order_by().values_list("status").annotate(n=models.Count("id"))
        )
        return {status: found.get(status, 0) for status in Submission.Status.values}

    def status_from(self, counts: dict[str, int]) -> str:
        """The batch's status, given counts() (read once by a caller that shows both)."""
        status = Submission.Status
        if self.cancelled_at is not None:
            return self.Status.CANCELLED
        waiting, running = counts.get(status.QUEUED, 0), counts.get(status.RUNNING, 0)
        ended = counts.get(status.FINISHED, 0) + counts.get(status.CANCELLED, 0)
        if waiting or running:
            return self.Status.RUNNING if running or ended else self.Status.QUEUED
        if ended and counts.get(status.CANCELLED, 0) == ended:
            return self.Status.CANCELLED
        return self.Status.FINISHED

    @property
    def status(self) -> str:
        return self.status_from(self.counts())

    def mark_cancelled(self, *, by) -> None:
        """Cancelled as a whole: kept even where some of its submissions had finished."""
        Batch.objects.filter(pk=self.pk, cancelled_at__isnull=True).update(
            cancelled_at=timezone.now(), cancelled_by=by if getattr(by, "pk", None) else None
        )
        self.refresh_from_db(fields=["cancelled_at", "cancelled_by"])


class Submission(models.Model):
    """One kernel source for one problem, by a user or by a model in a run."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        FINISHED = "finished"
        # Stopped by its owner (or an operator) before a verdict: never ranked, never claimed.
        CANCELLED = "cancelled"

    # Waiting or running: what holds a quota reservation and may be cancelled.
    OPEN = (Status.QUEUED, Status.RUNNING)
    # Nothing more comes: evaluated, or cancelled before a verdict.
    ENDED = (Status.FINISHED, Status.CANCELLED)

    class ReverificationState(models.TextChoices):
        NONE = "", "not re-verified"
        # A result that would set a new record: off the boards until its re-verification passes.
        PENDING = "pending", "pending re-verification"
        PASSED = "passed", "re-verified"
        FAILED = "failed", "failed re-verification"  # off the boards

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="submissions",
    )
    model = models.ForeignKey(
        Model, null=True, blank=True, on_delete=models.SET_NULL, related_name="submissions"
    )
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="submissions"
    )
    sample_index = models.PositiveSmallIntegerField(default=0)
    problem = models.ForeignKey(
        "problems.Problem", on_delete=models.PROTECT, related_name="submissions"
    )
    problem_version = models.ForeignKey(
        "problems.ProblemVersion", on_delete=models.PROTECT, related_name="submissions"
    )
    hardware = models.ForeignKey(
        "evaluation.Hardware", on_delete=models.PROTECT, related_name="submissions"
    )
    # One of evaluator.backends.NAMES, checked where a submission is made (the service, the
    # forms): no choices here, so that a language added to the backends' table needs no
    # migration.
    backend = models.CharField(max_length=16)
    precision = models.CharField(max_length=8, default="fp32")
    source = models.TextField()
    source_hash = models.CharField(max_length=64, db_index=True)
    # A test run is checked for correctness (and timed only when asked) and never ranked: not
    # on a board, in a record, a count or a model's tables (scoring.ranks says so, once).
    test_run = models.BooleanField(default=False)
    # Whether its evaluation times it: always for a ranked submission; a test run, if asked.
    timed = models.BooleanField(default=True)
    filename = models.CharField(max_length=255, blank=True)
    status = models.CharField(
        max_length=16, choices=Status, default=Status.QUEUED, db_index=True
    )
    verdict = models.CharField(max_length=32, blank=True)  # copy of the last evaluation's
    # How many times a runner has claimed it; a submission that keeps killing runners stops.
    attempts = models.PositiveSmallIntegerField(default=0)
    claimed_by = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Set by a competition that hides code: others never see it before this time.
    code_hidden_until = models.DateTimeField(null=True, blank=True)
    progress = models.JSONField(default=dict, blank=True)  # last phase / trial event
    # The outcome of its latest re-verification; PENDING and FAILED keep it off the boards.
    reverification = models.CharField(
        max_length=16, choices=ReverificationState, default=ReverificationState.NONE, blank=True
    )
    idempotency_key = models.CharField(max_length=200, blank=True)
    # The batch request that made it, if one did (cancelled together).
    batch = models.ForeignKey(
        Batch, null=True, blank=True, on_delete=models.SET_NULL, related_name="submissions"
    )
    # Who cancelled it (its owner, or the operator who disabled the account).
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    # Evaluation seconds a submission cancelled while running is charged (it stores no
    # evaluation, whose wall time is what the others are charged): from its claim to the cancel.
    charged_seconds = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # When its evaluation task reached the broker. Null on a queued submission means the enqueue
    # after the commit failed (database locked, broker down): a sweep queues it again.
    enqueued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="unique_submission_idempotency_key",
            )
        ]
        indexes = [
            models.Index(fields=["hardware", "status", "created_at"]),
            # The home page's recent results: 310 ms to 1.4 ms at 100,000 submissions.
            models.Index(fields=["status", "finished_at"]),
        ]

    def __str__(self) -> str:
        return f"submission {self.pk} for {self.problem_id}"

    def get_absolute_url(self) -> str:
        return reverse("submission_detail", args=[self.pk])

    @property
    def participant(self) -> str:
        return scoring.participant_key(user_id=self.user_id, model_id=self.model_id)

    @property
    def latest_evaluation(self):
        return self.evaluations.order_by("-finished_at").first()

    def claim(self, *, runner_name: str, lease_seconds: int) -> bool:
        """Queued (or running with an expired lease, after a runner died) -> running.

        A conditional UPDATE so exactly one worker wins, however many receive the task.
        """
        return leases.claim(
            self, runner_name=runner_name, lease_seconds=lease_seconds,
            progress={"phase": "claimed"},
        )

    def extend_lease(self, *, runner_name: str, lease_seconds: int) -> None:
        leases.extend(self, runner_name=runner_name, lease_seconds=lease_seconds)

    @property
    def is_settled(self) -> bool:
        """Finished, and its ranking is no longer waiting for a re-verification, or cancelled:
        what a client that waits for the outcome waits for (the API's `settled`)."""
        if self.status == self.Status.CANCELLED:
            return True
        return (self.status == self.Status.FINISHED
                and self.reverification != self.ReverificationState.PENDING)

    @property
    def is_open(self) -> bool:
        """Waiting or running: it may still be cancelled."""
        return self.status in self.OPEN

    def mark_cancelled(self, *, by) -> bool:
        """Queued or running -> cancelled, by a conditional update (a runner finishing it at the
        same moment wins or loses as a whole). A running one is charged the time since its
        claim; its runner sees the cancel at its next heartbeat (its lease is no longer held)
        and stops the evaluation. True when this call cancelled it; refreshes the row then."""
        now = timezone.now()
        running = models.Q(status=self.Status.RUNNING, started_at__isnull=False)
        charged = models.Case(
            models.When(running, then=models.Value(0.0)), default=None,
            output_field=models.FloatField(),
        )
        cancelled = Submission.objects.filter(pk=self.pk, status__in=self.OPEN).update(
            status=self.Status.CANCELLED,
            finished_at=now,
            lease_expires_at=None,
            charged_seconds=charged,
            progress={"phase": "cancelled"},
            cancelled_by=by if getattr(by, "pk", None) else None,
        )
        if not cancelled:
            return False
        self.refresh_from_db()
        if self.charged_seconds is not None and self.started_at is not None:
            # Computed here rather than in SQL: date arithmetic differs between SQLite and
            # PostgreSQL, and the row is ours now (nothing else writes a cancelled one).
            self.charged_seconds = max((now - self.started_at).total_seconds(), 0.0)
            self.save(update_fields=["charged_seconds"])
        return True

    def hold_for_reverification(self) -> None:
        """Off the boards until its re-verification passes (a result that would set a record)."""
        self.reverification = self.ReverificationState.PENDING
        self.save(update_fields=["reverification"])

    def mark_finished(self, *, verdict: str) -> None:
        self.status = self.Status.FINISHED
        self.verdict = verdict
        self.finished_at = timezone.now()
        self.lease_expires_at = None
        self.save(update_fields=["status", "verdict", "finished_at", "lease_expires_at"])

    def code_visible_to(self, user) -> bool:
        """submissions.selectors.can_see_source, the one rule (its home is with the reads)."""
        from submissions.selectors import can_see_source  # selectors import this module

        return can_see_source(self, user)


class Evaluation(models.Model):
    """One evaluation of a submission on a hardware: what the evaluator found, reproducibly."""

    # One member per verdict of evaluator/verdicts.py (CORRECT = "correct", ...).
    Verdict = models.TextChoices("Verdict", [(name.upper(), name) for name in verdicts.VERDICTS])

    class Purpose(models.TextChoices):
        SUBMISSION = "submission"
        REVERIFY = "reverify"

    submission = models.ForeignKey(
        Submission, on_delete=models.CASCADE, related_name="evaluations"
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
    # Where the device time went, per kernel, candidate and reference (GPU evaluations).
    profile = models.JSONField(default=dict, blank=True)
    source_hash = models.CharField(max_length=64)
    evaluator_version = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "evaluation_evaluation"  # moved from the evaluation app; the table stays
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
        """Correct, unflagged, timed and not a test run (evaluation/scoring.py, the one rule)."""
        return scoring.ranks(
            {"correct": self.correct, "flags": self.flags,
             "candidate_median_ms": self.candidate_median_ms,
             "submission__test_run": self.submission.test_run}
        )

    @property
    def timing_held(self) -> bool:
        """Honest and timed, but held off the boards by a holding note (a timing that did not
        reproduce, or that the judge's clock did not confirm): scoring.timing_held."""
        return scoring.timing_held(
            {"correct": self.correct, "flags": self.flags,
             "candidate_median_ms": self.candidate_median_ms}
        )

    @property
    def exploit_flags(self) -> list[str]:
        """The flags that are exploits (evaluator/flags.py); the rest are notes."""
        return flag_kinds.exploits(self.flags)

    @property
    def notes(self) -> list[dict]:
        """The notes, each {"name", "text"}: facts about an honest result, not exploits."""
        return flag_kinds.described_notes(self.flags, (self.static_report or {}).get("checks"))

    @property
    def device_seen(self) -> str | None:
        """What the GPU driver saw of the device during the timing window that counted, in
        words (clocks, power, other processes); None where it was not sampled."""
        timing = (self.static_report or {}).get("timing") or {}
        return flag_kinds.describe_device_seen(timing.get("device_seen"))

    @property
    def backend_share(self) -> str | None:
        """The own kernels' share of the profiled call, in words, where it was measured."""
        checks = (self.static_report or {}).get("checks") or {}
        return flag_kinds.backend_share_text(checks.get("backend"))


class Reverification(models.Model):
    """A submission evaluated again with fresh secret seeds, on another runner where one is live.

    Queued automatically for a result that would set a new record (the submission is held off
    the boards meanwhile), by an admin, or by its owner for a result held because the judge's
    clock did not confirm its timing (within QUOTA_REVERIFICATIONS_PER_DAY). queued -> running
    (claimed by one runner, with a lease like a submission's) -> passed, or failed with a plain
    reason.

    The speeds compared are the speedups measured side by side in each evaluation (the kernel
    and the reference timed on the same device in the same window, so a busy host slows both),
    each with its 95% interval (compare_timing; the rule is evaluation/stats.settle). The second
    evaluation correct, unflagged and agreeing with the first: passed, ranked on the slower of
    the two. Correct and unflagged but apart: the second evaluation is kept (`disputed_evaluation`)
    and the re-verification is queued once more for a third, which decides: agreeing with either,
    passed on the slower of the two that agree; with neither, passed on the slowest of all with
    the note TIMING_NOTE (never an exploit). It decides how fast, never whether: only a verdict
    or an exploit flag fails it. Failed and `held` is left for a re-verification none of whose
    timings the judge's clock confirmed (nothing to rank at), and for results held as "timing
    not reproduced" before that rule.
    """

    class Reason(models.TextChoices):
        NEW_RECORD = "new_record", "new record"
        ADMIN = "admin", "requested by an admin"
        OWNER = "owner", "requested by its owner"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        PASSED = "passed"
        FAILED = "failed"

    FINISHED = (Status.PASSED, Status.FAILED)
    OPEN = (Status.QUEUED, Status.RUNNING)
    # The note put on the deciding evaluation (in `flags`, a note by evaluator/flags.py, never
    # an exploit) when no two timings' intervals overlap: it ranks at the slowest of them.
    TIMING_NOTE = "timing_not_reproduced"
    TIMING_FLAG = TIMING_NOTE  # its older name
    # An evaluation's timing, as a whole: copied from the slower of the two when they agree.
    TIMING_FIELDS = (
        "candidate_stats", "reference_stats", "candidate_median_ms", "reference_median_ms",
        "speedup", "speedup_eager", "speedup_compile",
    )

    submission = models.ForeignKey(
        Submission, on_delete=models.CASCADE, related_name="reverifications"
    )
    reason = models.CharField(max_length=16, choices=Reason)
    status = models.CharField(max_length=16, choices=Status, default=Status.QUEUED)
    # The submission's own evaluation being checked, and the latest one this re-verification
    # stored (the second; the third once a disagreement was broken): the one that decides.
    checked_evaluation = models.ForeignKey(
        Evaluation, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    evaluation = models.ForeignKey(
        Evaluation, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    # The second evaluation when its timing disagreed with the first's: a third one decides.
    disputed_evaluation = models.ForeignKey(
        Evaluation, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    message = models.TextField(blank=True)  # why it failed, in plain words
    # The runner of the checked evaluation; see may_run_on.
    avoid_runner = models.CharField(max_length=200, blank=True)
    claimed_by = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # When its task reached the broker; null means a sweep should queue it (again).
    enqueued_at = models.DateTimeField(null=True, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["submission"],
                condition=models.Q(status__in=["queued", "running"]),
                name="one_open_reverification",
            )
        ]

    def __str__(self) -> str:
        return f"re-verification of submission {self.submission_id}: {self.status}"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    def may_run_on(self, runner_name: str) -> bool:
        """Any runner but the one that produced the checked result may run it.

        That one may only when no other runner of the hardware is live (heartbeat within
        RUNNER_OFFLINE_AFTER_SECONDS) and the re-verification has waited
        REVERIFY_SOLE_RUNNER_GRACE_SECONDS, time for another runner to come (back) online: a
        site with a single runner still gets its records re-verified, with fresh seeds, late.
        """
        if not self.avoid_runner or runner_name != self.avoid_runner:
            return True
        others_live = Runner.objects.filter(
            hardware_id=self.submission.hardware_id, last_seen__gte=Runner.online_since()
        ).exclude(name=runner_name)
        if others_live.exists():
            return False
        waited = timezone.now() - self.created_at
        return waited >= timedelta(seconds=settings.REVERIFY_SOLE_RUNNER_GRACE_SECONDS)

    def claim(self, *, runner_name: str, lease_seconds: int) -> bool:
        """Queued (or running with an expired lease) -> running, by a conditional update.

        Refused to a runner that may not run it (may_run_on); then hand_back leaves it queued
        for another runner.
        """
        if not self.may_run_on(runner_name):
            return False
        return leases.claim(self, runner_name=runner_name, lease_seconds=lease_seconds)

    def hand_back(self, *, runner_name: str) -> bool:
        """The runner to avoid got the task: leave it queued, with no task, for the sweep to
        queue again (so it does not bounce between the broker and that runner in a tight loop)."""
        return bool(
            Reverification.objects.filter(
                pk=self.pk, status=self.Status.QUEUED, avoid_runner=runner_name
            ).update(enqueued_at=None)
        )

    def extend_lease(self, *, runner_name: str, lease_seconds: int) -> None:
        leases.extend(self, runner_name=runner_name, lease_seconds=lease_seconds)

    ROLES = ("first", "second", "third")

    @classmethod
    def timing_of(cls, evaluation) -> dict:
        """An evaluation's timing fields (TIMING_FIELDS), as a plain mapping."""
        return {name: getattr(evaluation, name) for name in cls.TIMING_FIELDS}

    @classmethod
    def vouched(cls, flags) -> bool:
        """Whether an evaluation's timing counts in a comparison: not set aside by a holding
        note (flags.HOLDING_NOTES: the judge's clock did not confirm it, or it already failed
        to reproduce)."""
        return not any(f in flag_kinds.HOLDING_NOTES for f in flags or [])

    @classmethod
    def compare_timing(
        cls, timings: list[tuple[str, dict]], *, last: bool = False, set_aside: tuple = ()
    ) -> dict | None:
        """The evaluations whose timing counts, in the order they ran, as (role, mapping of
        TIMING_FIELDS) with role first, second or third, judged by the one rule (stats.settle):
        what was compared, each one's 95% interval, the `outcome` (agree; third: a third
        evaluation decides; apart), which two agree and which one the record ranks on (the
        slower of the two that agree; the slowest of all when apart). `last`: the third
        evaluation is among them, nothing more comes; `set_aside`: the roles whose timing a
        holding note kept out.

        Compared by the speedup over the reference timed beside the kernel in the same
        evaluation (a busy host slows both sides alike); only where an evaluation has none (no
        reference timed) by the kernel's median. None when there is nothing to compare (the
        verdict decides alone)."""
        values = [timing for _, timing in timings]
        what = "speedup" if all(t.get("speedup") for t in values) else "median"
        key = "speedup" if what == "speedup" else "candidate_median_ms"
        if not all(t.get(key) for t in values):
            return None
        floor = settings.TIMING_INTERVAL_FLOOR

        def interval(timing: dict) -> stats.Interval | None:
            if what == "speedup":
                return stats.speedup_interval(timing["speedup"], timing.get("candidate_stats"),
                                              timing.get("reference_stats"), floor=floor)
            return stats.median_interval(timing.get("candidate_stats"),
                                         median_ms=timing["candidate_median_ms"], floor=floor)

        roles = [role for role, _ in timings]
        comparison = {"compared": what, "confidence": 0.95, "floor": floor, "roles": roles,
                      "set_aside": list(set_aside)}
        if timings:
            intervals = [interval(t) for t in values]
            settled = stats.settle(intervals, higher_is_faster=what == "speedup", last=last)
            for role, timing, iv in zip(roles, values, intervals, strict=True):
                comparison[role] = iv.as_dict() if iv is not None else None
                comparison[f"{role}_median_ms"] = timing.get("candidate_median_ms")
        else:
            settled = stats.Settlement(stats.APART if last else stats.THIRD)
        comparison.update(
            outcome=settled.outcome,
            agrees=settled.outcome == stats.AGREE,
            agreeing=[roles[i] for i in settled.agreeing] if settled.agreeing else None,
            ranked_on=roles[settled.ranked_on] if settled.ranked_on is not None else None,
            note=cls.TIMING_NOTE if settled.outcome == stats.APART else None,
        )
        return comparison

    @staticmethod
    def timing_comparison(evaluation) -> dict:
        """What compare_timing found, as stored on the evaluation it judged ({} if nothing)."""
        if evaluation is None:
            return {}
        checks = (evaluation.static_report or {}).get("checks") or {}
        found = checks.get("reverification")
        if not isinstance(found, dict):
            return {}
        # Each compared evaluation's interval in order, for pages: {"role", "value", "low",
        # "high"} (comparisons stored before `roles` compared the first and the second).
        roles = found.get("roles") or ("first", "second")
        intervals = [{"role": role, **found[role]} for role in roles
                     if isinstance(found.get(role), dict)]
        return {**found, "intervals": intervals}

    @property
    def held(self) -> bool:
        """Failed only on timing, a note about measurement, not an exploit: the judge's clock
        confirmed none of its timings (scoring.timing_held), or it was held as "timing not
        reproduced" before such results ranked at their slowest timing."""
        if self.status != self.Status.FAILED or self.evaluation is None:
            return False
        evaluation = self.evaluation
        return evaluation.timing_held or (
            scoring.honest_and_timed({"correct": evaluation.correct, "flags": evaluation.flags,
                                      "candidate_median_ms": evaluation.candidate_median_ms})
            and self.TIMING_NOTE in (evaluation.flags or []))

    @property
    def is_third_round(self) -> bool:
        """Its first two evaluations disagreed; a third one decides."""
        return self.disputed_evaluation_id is not None

    def dispute(self, *, evaluation, runner_name: str) -> bool:
        """The second evaluation's timing disagreed with the first's: keep it, and queue this
        re-verification once more, for a third evaluation with fresh seeds (on another runner
        than the second's where one is live). The submission stays pending.

        Only while this runner still holds the claim (False otherwise)."""
        updated = Reverification.objects.filter(
            leases.held_by(Reverification, runner_name), pk=self.pk,
            disputed_evaluation__isnull=True,
        ).update(
            status=self.Status.QUEUED,
            evaluation=evaluation,
            disputed_evaluation=evaluation,
            avoid_runner=evaluation.runner_name,
            claimed_by="",
            attempts=0,
            lease_expires_at=None,
            enqueued_at=None,
            started_at=None,
        )
        if updated:
            self.refresh_from_db()
        return bool(updated)

    def finish(self, *, evaluation, runner_name: str) -> bool:
        """Record the second evaluation's outcome, on this and on the submission.

        Only while this runner still holds the claim (False otherwise: another runner took
        over a lapsed lease, and its result stands).
        """
        return self._close(leases.held_by(Reverification, runner_name), evaluation)

    def stop(self, *, evaluation) -> bool:
        """Fail it with `evaluation` (a runner_crash) when no live runner holds it."""
        return self._close(leases.claimable(), evaluation)

    @property
    def latest_role(self) -> str:
        """What its latest evaluation is (compare_timing's role): the second, or the third."""
        return "third" if self.is_third_round else "second"

    def _takes_vouched_timing(self, evaluation) -> bool:
        """Whether `evaluation` ranks on an earlier evaluation's timing while a holding note set
        its own aside (the judge's clock did not confirm it). The note was about its own
        timing, which the comparison keeps (`set_aside`, `<role>_timing`); the timing it carries
        now is one the judge vouched for, so the note no longer holds it."""
        comparison = self.timing_comparison(evaluation)
        role = self.latest_role
        ranked_on = comparison.get("ranked_on")
        return (ranked_on is not None and ranked_on != role
                and role in (comparison.get("set_aside") or ()))

    def _close(self, condition: models.Q, evaluation) -> bool:
        takes_vouched = self._takes_vouched_timing(evaluation)
        if takes_vouched:
            evaluation.flags = [f for f in evaluation.flags or [] if self.vouched([f])]
        status, message = self._outcome(evaluation)
        closed = Reverification.objects.filter(condition, pk=self.pk).update(
            status=status,
            evaluation=evaluation,
            message=message,
            finished_at=timezone.now(),
            lease_expires_at=None,
        )
        if not closed:
            return False
        if takes_vouched:
            evaluation.save(update_fields=["flags"])
        state = Submission.ReverificationState
        Submission.objects.filter(pk=self.submission_id).update(
            reverification=state.PASSED if status == self.Status.PASSED else state.FAILED
        )
        self.refresh_from_db()
        return True

    @staticmethod
    def timing_message(comparison: dict) -> str:
        """Why a re-verification's timings did not settle on two that agree, in plain words,
        with every interval, and the one it ranks at."""
        unit = "x" if comparison.get("compared") == "speedup" else " ms"

        def shown(side: dict) -> str:
            return (f"{side['value']:.4g}{unit} (95% interval {side['low']:.4g}"
                    f"-{side['high']:.4g}{unit})")

        roles = [role for role in comparison.get("roles") or ("first", "second")
                 if comparison.get(role)]
        measured = ", ".join(f"the {role} evaluation's {shown(comparison[role])}"
                             for role in reversed(roles))
        what = comparison.get("compared")
        if len(roles) >= 2:
            found = f"no two of the {len(roles)} evaluations' {what}s agree ({measured})"
        else:
            found = (f"the judge's clock confirmed the timing of one evaluation only "
                     f"({measured})")
        ranked_on = comparison.get("ranked_on")
        if ranked_on not in roles:  # stored before such results ranked
            return (f"Timing not reproduced: {found}. It is held off the board as measurement "
                    "noise, not as an exploit; every evaluation is shown, and its owner can ask "
                    "for another attempt.")
        slowest = "the slowest" if len(roles) >= 2 else "that one"
        return (f"Timing not reproduced: {found}. It ranks at {slowest}, the {ranked_on} "
                f"evaluation's {comparison[ranked_on]['value']:.4g}{unit}: measurement noise, "
                "not an exploit, and nothing is gained by a timing that was fast once.")

    def _outcome(self, evaluation) -> tuple[str, str]:
        role = self.latest_role
        if evaluation.timing_held:
            # No timing of its evaluations that the judge vouched for: nothing to rank at.
            return self.Status.FAILED, (
                "Timing not confirmed: the judge's own clock confirmed the timing of none of its "
                "evaluations, so there is no figure to rank it at. It is held off the board as "
                "a note, not as an exploit; every evaluation is shown, and its owner can ask for "
                "another attempt."
            )
        if evaluation.ranks:
            comparison = self.timing_comparison(evaluation)
            if comparison.get("outcome") == stats.APART:
                return self.Status.PASSED, self.timing_message(comparison)
            return self.Status.PASSED, ""
        if evaluation.flags:
            flags = ", ".join(evaluation.flags)
            return self.Status.FAILED, f"The {role} evaluation was flagged: {flags}."
        message = f"The {role} evaluation, on fresh inputs, ended {evaluation.verdict}."
        first_line = (evaluation.error.strip().splitlines() or [""])[0][:300]
        return self.Status.FAILED, f"{message} {first_line}".strip()


class NcuReport(models.Model):
    """An Nsight Compute report on a submission's own kernels, asked for by its owner or staff.

    Leased work like a re-verification: queued -> running (one runner of the submission's
    hardware) -> done, failed, or unavailable (that runner has no ncu, or no GPU). ncu runs in
    the candidate's sandbox, never inside a timed evaluation; `text` is its details page,
    `kernels` the small metric set per kernel, `report` the .ncu-rep file (owner and staff only).
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        UNAVAILABLE = "unavailable"

    OPEN = (Status.QUEUED, Status.RUNNING)

    submission = models.ForeignKey(
        Submission, on_delete=models.CASCADE, related_name="ncu_reports"
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    status = models.CharField(max_length=16, choices=Status, default=Status.QUEUED,
                              db_index=True)
    message = models.TextField(blank=True)  # why it failed or is unavailable, in plain words
    text = models.TextField(blank=True)
    kernels = models.JSONField(default=list, blank=True)
    report = models.BinaryField(null=True, blank=True, editable=False)
    report_size = models.PositiveIntegerField(default=0)  # bytes of `report` (0: no file)
    ncu_version = models.CharField(max_length=100, blank=True)
    seconds = models.FloatField(null=True, blank=True)  # ncu's own time, both passes
    claimed_by = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["submission"],
                condition=models.Q(status__in=["queued", "running"]),
                name="one_open_ncu_report",
            )
        ]

    def __str__(self) -> str:
        return f"ncu report {self.pk} of submission {self.submission_id}: {self.status}"

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN

    @property
    def has_file(self) -> bool:
        return self.report_size > 0

    def claim(self, *, runner_name: str, lease_seconds: int) -> bool:
        return leases.claim(self, runner_name=runner_name, lease_seconds=lease_seconds)

    def finish(self, *, runner_name: str, status: str, **fields) -> bool:
        """Running by `runner_name` -> done, failed or unavailable (False: the claim was lost)."""
        return leases.finish(self, runner_name=runner_name, status=status,
                             finished_at=timezone.now(), **fields)
