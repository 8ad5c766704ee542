"""Input and output serializers of the REST API (/api/v1/)."""

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from evaluation.profiles import profile_view
from evaluator import backends
from evaluator.config import DEFAULT_TOLERANCE
from problems.models import Problem
from submissions.models import Batch, Evaluation, NcuReport, Reverification, Submission
from submissions.selectors import (
    LOG_FIELDS,
    RankingDetail,
    RankingState,
    evaluation_logs,
    first_compile_error,
    queue_estimate,
    shown_error,
    shown_profile,
    shown_static_report,
    shown_trials,
    submission_ranking,
)
from submissions.services import BATCH_MAX, PRECISIONS

# ---- problems and hardware ----------------------------------------------------------------------


# Query filters: an empty value (`?status=`) means no filter, as in an HTML form, and the
# schema says so (blank allowed).


class ProblemFilterSerializer(serializers.Serializer):
    level = serializers.IntegerField(required=False, min_value=1)
    status = serializers.ChoiceField(
        choices=Problem.Status.choices, required=False, allow_blank=True
    )
    q = serializers.CharField(
        required=False, allow_blank=True, help_text="Text in the name or slug."
    )


class ProblemListSerializer(serializers.Serializer):
    level = serializers.IntegerField()
    number = serializers.IntegerField()
    slug = serializers.CharField()
    name = serializers.CharField()
    status = serializers.CharField()
    precision = serializers.CharField()
    url = serializers.SerializerMethodField()

    def get_url(self, problem) -> str:
        # By its slug, as every link names a problem (problems.selectors).
        request = self.context["request"]
        return request.build_absolute_uri(reverse("api_problem_detail", args=problem.url_args))


class BaselineSerializer(serializers.Serializer):
    hardware = serializers.CharField(source="hardware.slug")
    mode = serializers.CharField()
    median_ms = serializers.FloatField()


class ToleranceSerializer(serializers.Serializer):
    atol = serializers.FloatField()
    rtol = serializers.FloatField()


class ProblemDetailSerializer(ProblemListSerializer):
    description = serializers.CharField()
    atol = serializers.SerializerMethodField(
        help_text="The absolute tolerance that applies at the problem's precision: its own, "
        "else the evaluator's default for the precision."
    )
    rtol = serializers.SerializerMethodField(
        help_text="The relative tolerance, likewise."
    )
    tolerances = serializers.SerializerMethodField(
        help_text="The tolerances at each precision a submission may choose."
    )
    version = serializers.IntegerField(source="current_version.version", allow_null=True)
    source_hash = serializers.CharField(source="current_version.source_hash", allow_null=True)
    source = serializers.SerializerMethodField(
        help_text="The reference program (KernelBench format); null where its code is not public."
    )
    open_for_submissions = serializers.SerializerMethodField(
        help_text="Whether you may submit to it (a retired problem takes no submissions)."
    )
    baselines = BaselineSerializer(many=True, source="baselines.all")

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_source(self, problem: Problem) -> str | None:
        return problem.source if problem.reference_visible_to(self.context.get("user")) else None

    def get_open_for_submissions(self, problem: Problem) -> bool:
        return problem.takes_submissions_from(self.context.get("user"))

    def get_atol(self, problem: Problem) -> float:
        return effective_tolerance(problem, problem.precision)["atol"]

    def get_rtol(self, problem: Problem) -> float:
        return effective_tolerance(problem, problem.precision)["rtol"]

    @extend_schema_field(serializers.DictField(child=ToleranceSerializer()))
    def get_tolerances(self, problem: Problem) -> dict:
        return {precision: effective_tolerance(problem, precision) for precision in PRECISIONS}


def effective_tolerance(problem: Problem, precision: str) -> dict[str, float]:
    """What the evaluator compares with (evaluator/config.py normalize_job): the
    problem's own atol/rtol, each falling back to the default of the precision."""
    default = DEFAULT_TOLERANCE[precision]
    return {
        "atol": float(default if problem.atol is None else problem.atol),
        "rtol": float(default if problem.rtol is None else problem.rtol),
    }


class HardwareSerializer(serializers.Serializer):
    slug = serializers.CharField(source="hardware.slug")
    name = serializers.CharField(source="hardware.name")
    kind = serializers.CharField(source="hardware.kind")
    arch = serializers.CharField(source="hardware.arch")
    memory_bytes = serializers.IntegerField(source="hardware.memory_bytes", allow_null=True)
    gpu_count = serializers.IntegerField(source="hardware.gpu_count")
    backends = serializers.ListField(child=serializers.CharField(), source="hardware.backends")
    torch_version = serializers.CharField(source="hardware.torch_version")
    cuda_version = serializers.CharField(source="hardware.cuda_version")
    triton_version = serializers.CharField(source="hardware.triton_version")
    queue_length = serializers.IntegerField(source="queued", help_text="Submissions waiting.")
    running = serializers.IntegerField()
    online_runners = serializers.IntegerField(source="online")


# ---- submissions: input -------------------------------------------------------------------------


@extend_schema_field({"type": "string", "enum": list(backends.NAMES)})
class BackendField(serializers.CharField):
    """A backend's name: the schema lists the backends' table; free text all the same, so that
    the service answers an unknown one with the allowed ones (unknown_backend)."""


class SubmissionInputSerializer(serializers.Serializer):
    # The problem: by its slug, or by level and number (as before the slug was taken).
    problem = serializers.CharField(
        required=False, allow_blank=True, max_length=200,
        help_text="The problem's slug, e.g. level1/19_ReLU (or give `level` and `number`).",
    )
    level = serializers.IntegerField(min_value=0, required=False)
    number = serializers.IntegerField(min_value=0, required=False)
    backend = BackendField(max_length=32, help_text="The kernel's language.")
    hardware = serializers.CharField(
        max_length=64, required=False, allow_blank=True,
        help_text="A hardware slug, e.g. h200; left out, the site's only hardware.",
    )
    source = serializers.CharField(
        trim_whitespace=False,
        allow_blank=True,
        help_text=f"The kernel file (UTF-8, at most {settings.SUBMISSION_MAX_BYTES} bytes).",
    )
    precision = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=8,
        help_text=f"One of {', '.join(PRECISIONS)}; the problem's precision when left out.",
    )
    model = serializers.CharField(
        required=False, allow_blank=True, max_length=200, help_text="A model's litellm name."
    )
    run = serializers.IntegerField(required=False, allow_null=True, help_text="A run's id.")
    filename = serializers.CharField(required=False, allow_blank=True, max_length=255)
    test_run = serializers.BooleanField(
        required=False, default=False,
        help_text="A test run: checked for correctness on fresh secret inputs as any "
        "submission, timed only with `timing`, and never ranked (no board, record or count). "
        "It takes less of the daily evaluation-time quota when left untimed.",
    )
    timing = serializers.BooleanField(
        required=False, allow_null=True, default=None,
        help_text="With `test_run`: time it too (its speedup is shown, never ranked). A ranked "
        "submission is always timed.",
    )


class SubmissionUploadSerializer(SubmissionInputSerializer):
    """The same fields as multipart form data, with the kernel as a file."""

    source = None  # type: ignore[assignment]
    file = serializers.FileField(help_text="The kernel file; must be UTF-8 text.")


class BatchInputSerializer(serializers.Serializer):
    submissions = SubmissionInputSerializer(many=True, max_length=BATCH_MAX, allow_empty=False)


class SubmissionFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=Submission.Status.choices, required=False, allow_blank=True
    )
    verdict = serializers.CharField(required=False, allow_blank=True)
    backend = serializers.CharField(required=False, allow_blank=True)
    hardware = serializers.CharField(required=False, allow_blank=True)
    level = serializers.IntegerField(required=False)
    number = serializers.IntegerField(required=False)
    problem = serializers.CharField(
        required=False, allow_blank=True, help_text="Text in the problem's slug."
    )
    test_run = serializers.BooleanField(
        required=False, allow_null=True, default=None,
        help_text="true: only test runs; false: only ranked submissions; left out: both.",
    )


# ---- submissions: output ------------------------------------------------------------------------


def submission_urls(request, submission: Submission) -> dict:
    api = request.build_absolute_uri(f"/api/v1/submissions/{submission.pk}/")
    websocket = request.build_absolute_uri(f"/ws/submissions/{submission.pk}/")
    websocket = "ws" + websocket.removeprefix("http")  # http -> ws, https -> wss
    return {
        "url": api,
        "events_url": api + "events/",
        "stream_url": websocket,
        "page_url": request.build_absolute_uri(submission.get_absolute_url()),
    }


class AcceptedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=Submission.Status.choices)
    url = serializers.URLField(help_text="Poll this for the status and the result.")
    events_url = serializers.URLField(
        help_text="Server-sent events until it is settled (its ranking decided)."
    )
    stream_url = serializers.CharField(help_text="A websocket with the same events.")
    page_url = serializers.URLField()

    @staticmethod
    def build(request, submission: Submission) -> dict:
        return {"id": submission.pk, "status": submission.status,
                **submission_urls(request, submission)}


class BatchAcceptedSerializer(serializers.Serializer):
    batch = serializers.IntegerField(help_text="The batch's id: /api/v1/batches/ID/ follows "
                                     "it, and /api/v1/batches/ID/cancel/ cancels it.")
    batch_url = serializers.URLField()
    submissions = AcceptedSerializer(many=True)


class SubmissionUrlsSerializer(serializers.Serializer):
    url = serializers.URLField(help_text="This submission in the API.")
    events_url = serializers.URLField(
        help_text="Server-sent events (text/event-stream, with the same Authorization header) "
        "until it is settled (finished, and its ranking no longer pending a re-verification): "
        "`status` events, then the final one."
    )
    stream_url = serializers.CharField(help_text="A websocket with the same events.")
    page_url = serializers.URLField(help_text="Its page on the site.")


class RankingSerializer(serializers.Serializer):
    state = serializers.ChoiceField(
        choices=RankingState.choices,
        help_text="ranked: on its board; pending: no result yet, or a would-be record waiting "
        "for its second evaluation with fresh seeds; held: correct and unflagged, but the "
        "judge's clock confirmed none of its timings (a note, not an exploit; evaluations that "
        "disagree rank at the slowest instead); off_board: it does not count (see detail).",
    )
    detail = serializers.ChoiceField(
        choices=RankingDetail.choices,
        help_text="Why, as a code: ranked; pending_reverification, not_evaluated (pending); "
        "timing_unconfirmed (held: the judge's clock did not confirm the reported times), "
        "timing_not_reproduced (held before results whose evaluations disagree ranked at the "
        "slowest); its owner may ask for another attempt at either; "
        "failed_reverification (a re-verification's evaluation was not "
        "correct or was flagged), flagged (an exploit check), not_correct, not_timed "
        "(off_board).",
    )
    rank = serializers.IntegerField(
        allow_null=True,
        help_text="Its place on the board (problem, hardware), 1 the fastest; null when it "
        "does not rank, or when the participant's faster submission is the one on the board.",
    )
    reason = serializers.CharField(help_text="Why, in plain words.")


class SubmissionProblemSerializer(serializers.Serializer):
    level = serializers.IntegerField()
    number = serializers.IntegerField()
    slug = serializers.CharField()


class NoteSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="e.g. backend_share_small, timing_not_reproduced")
    text = serializers.CharField(help_text="What it means for this result, in words (with the "
                                 "measured share where it has one).")


FLAGS_HELP = ("Exploits only: the exploit checks that flagged the result (it is rejected or kept "
              "off the boards). Facts about an honest result are in `notes`.")
NOTES_HELP = ("Notes, not exploits: facts about an honest result, e.g. backend_share_small (the "
              "kernel's own kernels do a tiny share of the time: it ranks, no better than the "
              "reference) or timing_not_reproduced.")


class EvaluationSerializer(serializers.Serializer):
    """The full evaluation. What is derived from the source (error text, compiler output,
    traceback, logs, each trial's text, static report, profile, diagnosis, source hash) only for
    whoever may see the source (context "source", selectors.can_see_source); what the judge
    quotes of the reference only for whoever may see the reference too (context "reference",
    selectors.can_see_reference); seeds only for the owner and admins (context "owner",
    selectors.can_act_on). Others get the verdict's generic error, the trials' numbers and
    nulls."""

    id = serializers.IntegerField()
    attempt = serializers.IntegerField()
    hardware = serializers.CharField(source="hardware.slug")
    problem_version = serializers.IntegerField(source="problem_version.version")
    runner = serializers.CharField(source="runner_name")
    verdict = serializers.ChoiceField(choices=Evaluation.Verdict.choices)
    correct = serializers.BooleanField()
    error = serializers.CharField(help_text="Others than the owner and admins: a generic message.")
    trials = serializers.ListField(
        child=serializers.DictField(),
        help_text="One record per correctness trial: k, passed, max_abs_diff, mean_abs_diff, "
        "flags. Whoever may see the source also gets its text: `reason` (why its output is "
        "wrong), `error` (the kernel's, where it failed) and, on a failed trial, `diagnosis` "
        "(see the `diagnosis` field).",
    )
    diagnosis = serializers.SerializerMethodField(
        help_text="Whoever may see the source (like the failed trial's note on its output; "
        "null for others): what the failed trial tells the kernel's author, "
        "null when no trial failed on its values, shape or dtype. `pattern` first: the shape "
        "of the error, found before any guess at its cause: `sentence` in plain words (e.g. "
        "'All 39 wrong values are in the last column, 511: a boundary or tail bug'), `kind` "
        "(tail, head, edges, block, halo, strided, transposed, column_major, shifted, nan, inf, "
        "zeros, scale, sign, offset, single, rounding, spread), `count` of `elements` wrong and "
        "their `fraction`, and its facts (`ranges`: per dimension the [first, last] index "
        "ranges holding every wrong value; `border`, `period`, `shift`, `factor`, `offset`); "
        "`fits_precision`: true only for small errors spread out, the one pattern a precision "
        "hint is given for. `hint`: one actionable "
        "sentence, e.g. 'consistent with TF32 accumulation: pass input_precision=\"ieee\" to "
        "tl.dot or disable TF32' when the error matches the reference recomputed with TF32 "
        "(likewise fp16/bf16 inputs or accumulation: `precision_match` names the variant, "
        "`precision_match_by` says how: same_rounding, or error_size alone and the hint then "
        "begins 'Maybe'; `precision` holds each variant's mean abs error and whether it "
        "matches), a transposed, "
        "permuted, reshaped or broadcast shape (`kind`, `expected_shape`, `got_shape`, "
        "`values_match`), NaN/inf (`nonfinite`: counts nan, posinf, neginf and the `first` "
        "positions), a wrong dtype (`expected_dtype`, `got_dtype`). `worst`: up to 5 elements "
        "furthest outside the tolerance (index: flat index, position: multi-index, expected, "
        "got, abs_diff), with `outside_tolerance` of `elements`. `k`: the trial; `output`: "
        "which output, when the problem returns several.",
    )
    candidate = serializers.DictField(source="candidate_stats", allow_null=True)
    reference = serializers.DictField(source="reference_stats", allow_null=True)
    candidate_ms = serializers.FloatField(source="candidate_median_ms", allow_null=True)
    reference_ms = serializers.FloatField(source="reference_median_ms", allow_null=True)
    speedup = serializers.FloatField(allow_null=True)
    speedup_eager = serializers.FloatField(allow_null=True)
    speedup_compile = serializers.FloatField(allow_null=True)
    flags = serializers.ListField(child=serializers.JSONField(), source="exploit_flags",
                                  help_text=FLAGS_HELP)
    notes = NoteSerializer(many=True, help_text=NOTES_HELP)
    static_report = serializers.DictField(
        allow_null=True,
        help_text="What the source uses (kernels, helpers, imports, sizes) and the evidence "
        "behind each check. Null for those who may not see the source; the reference's values "
        "(`problem_constants_changed`'s `reference`) only for those who may see the reference.",
    )
    environment = serializers.DictField()
    phases = serializers.DictField()
    source_hash = serializers.CharField(
        allow_null=True, help_text="Null for those who may not see the source."
    )
    evaluator_version = serializers.CharField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField()
    compile_log = serializers.CharField(
        allow_null=True, help_text="Whoever may see the source; host paths replaced by "
        "placeholders (<venv>, <python>, <build>), harness warnings left out."
    )
    compile_error = serializers.SerializerMethodField(
        help_text="Whoever may see the source: the compiler's first error (message, the "
        "compiled file and line, and `source_line` in the submitted file where it maps), else "
        "null."
    )
    traceback = serializers.CharField(allow_null=True, help_text="Whoever may see the source.")
    logs = serializers.CharField(allow_null=True, help_text="Whoever may see the source.")
    seeds = serializers.DictField(allow_null=True, help_text="Owner and admins only.")
    profile = serializers.SerializerMethodField(
        help_text="Owner and admins only, GPU evaluations: where the device time went, per "
        "kernel (name, own, calls, device_us, share), for the submitted kernel and the "
        "reference, with the whole call's achieved bytes/s and FLOP/s against the hardware's "
        "peaks. Null otherwise."
    )

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_compile_error(self, evaluation) -> dict | None:
        if not self.context.get("source"):
            return None
        return first_compile_error(evaluation)

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_diagnosis(self, evaluation) -> dict | None:
        if not self.context.get("source"):
            return None
        for trial in evaluation.trials or []:
            if isinstance(trial, dict) and trial.get("diagnosis"):
                return {"k": trial.get("k"), **trial["diagnosis"]}
        return None

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_profile(self, evaluation) -> dict | None:
        if not self.context.get("source"):
            return None
        view = shown_profile(profile_view(evaluation),
                             reference=bool(self.context.get("reference")))
        if view is None:
            return None
        return {key: value for key, value in view.items() if key != "roofline"}

    def to_representation(self, evaluation):
        data = super().to_representation(evaluation)
        details = bool(self.context.get("source"))  # selectors.can_see_source
        logs = evaluation_logs(evaluation, details=details)
        for field in LOG_FIELDS:
            data[field] = logs[field] if details or field == "error" else None
        data["trials"] = shown_trials(evaluation, details=details)
        data["static_report"] = shown_static_report(
            evaluation, details=details, reference=bool(self.context.get("reference")))
        if not details:
            data["source_hash"] = None
        if not self.context.get("owner"):  # selectors.can_act_on
            data["seeds"] = None
        return data


class SubmissionSerializer(serializers.Serializer):
    """Serializes the dict built by `submission_data` below."""

    id = serializers.IntegerField()
    problem = SubmissionProblemSerializer()
    backend = serializers.CharField()
    hardware = serializers.CharField()
    precision = serializers.CharField()
    filename = serializers.CharField()
    user = serializers.CharField(allow_null=True)
    model = serializers.CharField(allow_null=True, help_text="The model's litellm name.")
    run = serializers.IntegerField(allow_null=True)
    test_run = serializers.BooleanField(help_text="A test run: checked, never ranked.")
    timed = serializers.BooleanField(help_text="Whether its evaluation times it.")
    status = serializers.ChoiceField(
        choices=Submission.Status.choices,
        help_text="queued, running, finished (it has a verdict), or cancelled (stopped by its "
        "owner or an operator before a verdict: no result, never ranked).",
    )
    batch = serializers.IntegerField(
        allow_null=True, help_text="The batch it was sent in, if any (/api/v1/batches/ID/).")
    verdict = serializers.CharField(allow_null=True)
    correct = serializers.BooleanField(allow_null=True)
    candidate_ms = serializers.FloatField(allow_null=True)
    reference_ms = serializers.FloatField(allow_null=True)
    speedup = serializers.FloatField(allow_null=True)
    flags = serializers.ListField(child=serializers.JSONField(), help_text=FLAGS_HELP)
    notes = NoteSerializer(many=True, help_text=NOTES_HELP)
    error = serializers.CharField(allow_null=True)
    queue_position = serializers.IntegerField(allow_null=True)
    queue_estimate_s = serializers.IntegerField(
        allow_null=True,
        help_text="While queued: about how many seconds until the result (the work ahead and "
        "running, shared over the hardware's online runners, at the median of its latest "
        "evaluations); null when no runner is online, nothing has been timed yet, or it left "
        "the queue.",
    )
    progress = serializers.DictField()
    attempts = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    source_hash = serializers.CharField(
        allow_null=True, help_text="Null for those who may not see the source."
    )
    source = serializers.CharField(
        allow_null=True,
        help_text="Null for those who may not see it: a private problem's, a draft's, or a "
        "competition entry's while the competition hides code (selectors.can_see_source).",
    )
    urls = SubmissionUrlsSerializer()
    ranking = RankingSerializer(help_text="Whether its result ranks on its board, and why not.")
    settled = serializers.BooleanField(
        help_text="True once nothing more is coming: cancelled, or finished and its ranking no "
        "longer pending a re-verification (a would-be record is evaluated again, a third time "
        "where two disagree, before it ranks or is held). Wait for this, not for `status`, to "
        "learn the outcome; the event stream and the websocket go on until it is true."
    )
    evaluation = EvaluationSerializer(allow_null=True)


class SubmissionListItemSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    problem = SubmissionProblemSerializer()
    backend = serializers.CharField()
    hardware = serializers.CharField(source="hardware.slug")
    verdict = serializers.SerializerMethodField()
    precision = serializers.CharField()
    test_run = serializers.BooleanField(help_text="A test run: checked, never ranked.")
    status = serializers.ChoiceField(choices=Submission.Status.choices)
    batch = serializers.IntegerField(source="batch_id", allow_null=True,
                                     help_text="The batch it was sent in, if any.")
    reverification = serializers.ChoiceField(
        choices=Submission.ReverificationState.choices, allow_blank=True,
        help_text="pending (a would-be record evaluated again before it ranks), passed, failed; "
        "empty when none was needed.",
    )
    settled = serializers.BooleanField(
        source="is_settled",
        help_text="Finished, and its ranking no longer pending; or cancelled.",
    )
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    url = serializers.SerializerMethodField()

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_verdict(self, submission) -> str | None:
        return submission.verdict or None

    def get_url(self, submission) -> str:
        return self.context["request"].build_absolute_uri(
            f"/api/v1/submissions/{submission.pk}/"
        )


class BatchSerializer(serializers.Serializer):
    """A batch of submissions, made by one request to the batch API."""

    id = serializers.IntegerField()
    status = serializers.ChoiceField(
        choices=Batch.Status.choices,
        help_text="queued: every submission waiting; running: some evaluated or running, some "
        "to come; finished: none waiting or running; cancelled: cancelled as a whole (those "
        "finished before keep their results), or every submission cancelled.",
    )
    counts = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="How many of its submissions are in each status (queued, running, finished, "
        "cancelled).",
    )
    created_at = serializers.DateTimeField()
    cancelled_at = serializers.DateTimeField(allow_null=True)
    url = serializers.URLField()
    submissions = SubmissionListItemSerializer(
        many=True, help_text="Its submissions, in the request's order.")

    @staticmethod
    def build(request, batch: Batch) -> dict:
        """What it serializes (with the request in its context, for the submissions' urls)."""
        counts = batch.counts()
        rows = batch.submissions.select_related("problem", "hardware").order_by("pk")
        return {
            "id": batch.pk,
            "status": batch.status_from(counts),
            "counts": counts,
            "created_at": batch.created_at,
            "cancelled_at": batch.cancelled_at,
            "url": request.build_absolute_uri(f"/api/v1/batches/{batch.pk}/"),
            "submissions": rows,
        }


class QuotaSerializer(serializers.Serializer):
    exempt = serializers.BooleanField(help_text="Staff have no quotas.")
    queued = serializers.IntegerField(help_text="Your submissions waiting or running now.")
    max_queued = serializers.IntegerField(help_text="At most this many at once; 0: no limit.")
    queued_left = serializers.IntegerField(allow_null=True)
    gpu_seconds = serializers.FloatField(help_text="Evaluation seconds used today (UTC).")
    gpu_seconds_per_day = serializers.IntegerField(help_text="The daily budget; 0: no limit.")
    gpu_seconds_reserved = serializers.FloatField(
        help_text="Evaluation seconds reserved by your submissions waiting or running, each at "
        "its problem's estimate on its hardware, until it finishes.")
    gpu_seconds_left = serializers.FloatField(
        allow_null=True, help_text="The budget less what is used and reserved.")
    resets_at = serializers.DateTimeField(help_text="When today's evaluation seconds reset.")
    max_source_bytes = serializers.IntegerField(
        help_text="The largest kernel file a submission takes, in bytes (UTF-8): the one limit "
        "the web, the API and kb read.")


def submission_data(request, submission: Submission, *, show_source: bool, show_reference: bool,
                    owner: bool) -> dict:
    """The API's view of one submission; the verdict's numbers come from its last evaluation.
    `show_source`: selectors.can_see_source, for the source and all derived from it;
    `show_reference`: selectors.can_see_reference, for what the judge quotes of the reference;
    `owner`: selectors.can_act_on, for the seeds. They go on as the serializer's context."""
    evaluation = submission.latest_evaluation
    estimate = queue_estimate(submission)
    return {
        "id": submission.pk,
        "problem": submission.problem,
        "backend": submission.backend,
        "hardware": submission.hardware.slug,
        "precision": submission.precision,
        "filename": submission.filename,
        "user": submission.user.username if submission.user_id else None,
        "model": submission.model.litellm_name if submission.model_id else None,
        "run": submission.run_id,
        "test_run": submission.test_run,
        "timed": submission.timed,
        "status": submission.status,
        "batch": submission.batch_id,
        "verdict": submission.verdict or None,
        "correct": evaluation.correct if evaluation else None,
        "candidate_ms": evaluation.candidate_median_ms if evaluation else None,
        "reference_ms": evaluation.reference_median_ms if evaluation else None,
        "speedup": evaluation.speedup if evaluation else None,
        "flags": evaluation.exploit_flags if evaluation else [],
        "notes": evaluation.notes if evaluation else [],
        "error": shown_error(evaluation, details=show_source) or None,
        "queue_position": estimate["position"] if estimate else None,
        "queue_estimate_s": estimate["seconds"] if estimate else None,
        "progress": submission.progress or {},
        "attempts": submission.attempts,
        "created_at": submission.created_at,
        "started_at": submission.started_at,
        "finished_at": submission.finished_at,
        "source_hash": submission.source_hash if show_source else None,
        "source": submission.source if show_source else None,
        "urls": submission_urls(request, submission),
        "ranking": submission_ranking(submission),
        "settled": submission.is_settled,
        "evaluation": evaluation,
        "visibility": {"source": show_source, "reference": show_reference, "owner": owner},
    }


class ReverificationSerializer(serializers.Serializer):
    """A re-verification of a submission: its evaluation again with fresh secret seeds."""

    id = serializers.IntegerField()
    submission = serializers.IntegerField(source="submission_id")
    reason = serializers.ChoiceField(choices=Reverification.Reason.choices)
    status = serializers.ChoiceField(
        choices=Reverification.Status.choices,
        help_text="queued or running until it lands; passed (it ranks) or failed (see message; "
        "`held` when only the timing did not reproduce).",
    )
    third_evaluation = serializers.BooleanField(
        source="is_third_round",
        help_text="The second evaluation's speedup disagreed with the first's: a third decides.",
    )
    held = serializers.BooleanField()
    message = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class NcuReportSerializer(serializers.Serializer):
    """An Nsight Compute report on a submission's kernels (owner and admins)."""

    id = serializers.IntegerField()
    submission = serializers.IntegerField(source="submission_id")
    status = serializers.ChoiceField(choices=NcuReport.Status.choices)
    message = serializers.CharField(help_text="Why it failed or is unavailable.")
    kernels = serializers.ListField(
        child=serializers.DictField(),
        help_text="Per profiled kernel: name, duration_ns, compute_pct, memory_pct, "
        "occupancy_pct, l2_pct, dram_pct, dram_bytes, flops, stalls ([reason, value]).",
    )
    text = serializers.CharField(help_text="ncu's details page, as text.")
    ncu_version = serializers.CharField()
    seconds = serializers.FloatField(allow_null=True, help_text="ncu's own time, both passes.")
    report_url = serializers.SerializerMethodField(
        help_text="The .ncu-rep file, for Nsight Compute's UI; null until there is one."
    )
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_report_url(self, report) -> str | None:
        if report.status != NcuReport.Status.DONE or not report.has_file:
            return None
        url = reverse("submission_ncu_report", args=[report.submission_id, report.pk])
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request else url
