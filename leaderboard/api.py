"""REST API for the leaderboards (/api/v1/leaderboard/...): the same boards and tables as the
pages, read-only and public, for agents that track their standing. Authentication, throttles and
the error shape are the rest of the API's (accounts.api.ApiMixin)."""

from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api import ApiMixin
from evaluation.models import Hardware
from kbsite.api_errors import ApiErrorSerializer, error_body
from leaderboard import selectors
from problems.models import Problem
from problems.selectors import asked_name, problem_by_name
from submissions.api import PROBLEM_NAME
from submissions.runs.models import Model, Run

# ---- input ------------------------------------------------------------------------------------


class HardwareSlugField(serializers.SlugRelatedField):
    def __init__(self, **kwargs) -> None:
        super().__init__(slug_field="slug", queryset=Hardware.objects.all(), **kwargs)


class TableQuerySerializer(serializers.Serializer):
    hardware = HardwareSlugField(required=False, help_text="Hardware slug, e.g. h200.")
    level = serializers.IntegerField(min_value=1, max_value=99, required=False)
    baseline = serializers.ChoiceField(
        choices=selectors.BASELINES,
        default="eager",
        help_text="eager: speedup over the reference measured side by side; compile: over "
        "the torch.compile baseline.",
    )


class BaselineQuerySerializer(serializers.Serializer):
    baseline = serializers.ChoiceField(choices=selectors.BASELINES, default="eager")


def precision_field(help_text: str) -> serializers.ChoiceField:
    return serializers.ChoiceField(
        choices=Problem.Precision.values, required=False, help_text=help_text
    )


class BoardQuerySerializer(serializers.Serializer):
    precision = precision_field(
        "The board's precision: a board is one (problem, hardware, precision). Left out, the "
        "problem's own (its main board); another one's board ranks the kernels judged in that "
        "precision (its inputs, reference and tolerance), apart from the main board."
    )


class RecordsQuerySerializer(serializers.Serializer):
    hardware = HardwareSlugField(required=False)
    precision = precision_field(
        "The records of the boards of this precision; left out, of each problem's main board "
        "(its own precision)."
    )
    limit = serializers.IntegerField(min_value=1, max_value=200, default=20)


class EvalResultsQuerySerializer(serializers.Serializer):
    level = serializers.IntegerField(
        min_value=1,
        max_value=99,
        required=False,
        help_text="Required when the run covers several levels.",
    )


def _query(serializer_class, request) -> dict:
    serializer = serializer_class(data=request.query_params)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


# ---- output -----------------------------------------------------------------------------------


class ProblemRefSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    slug = serializers.CharField()
    level = serializers.IntegerField()
    number = serializers.IntegerField()
    status = serializers.CharField()
    precision = serializers.CharField(help_text="The problem's own precision: its main board's.")


class BoardFieldsSerializer(serializers.Serializer):
    """What a row says of the board it is on (selectors.board_fields)."""

    precision = serializers.CharField(
        help_text="The board's precision: the one its kernels were judged in."
    )
    main_board = serializers.BooleanField(
        help_text="Whether the board is the problem's main board (its own precision); only "
        "main boards count in the tables (fast_p, people, models)."
    )
    board = serializers.CharField(
        help_text="The board's label, e.g. 'main board (fp32)' or 'bf16 board'."
    )


class BoardChoiceSerializer(BoardFieldsSerializer):
    ranked = serializers.IntegerField()


class BoardRowSerializer(serializers.Serializer):
    rank = serializers.IntegerField(help_text="Strict order: on equal times, the earlier first.")
    shown_rank = serializers.IntegerField(
        help_text="The rank as shown: a tie (see `tie`) shares the rank of the entry above it."
    )
    tie = serializers.BooleanField(
        help_text="Its time's 95% interval overlaps the entry above's: a tie within the noise."
    )
    interval_ms = serializers.FloatField(
        allow_null=True, help_text="Half-width of the time's 95% confidence interval (the "
        "± shown beside it), from the timing samples, at least TIMING_INTERVAL_FLOOR."
    )
    low_ms = serializers.FloatField(allow_null=True, help_text="The interval's lower end.")
    high_ms = serializers.FloatField(allow_null=True, help_text="The interval's upper end.")
    participant = serializers.CharField()
    participant_key = serializers.CharField(help_text='"user:<id>" or "model:<id>".')
    submission_id = serializers.IntegerField(allow_null=True)
    evaluation_id = serializers.IntegerField(allow_null=True)
    candidate_ms = serializers.FloatField()
    reference_ms = serializers.FloatField(
        allow_null=True, help_text="The reference's time measured beside this kernel."
    )
    speedup = serializers.FloatField(
        allow_null=True,
        help_text="Against the board's one reference time (the median of reference_ms over its "
        "ranked entries), so it falls as the rank rises; the submission's own speedup, against "
        "the reference beside it, is in /api/v1/submissions/ID/.",
    )
    speedup_eager = serializers.FloatField(allow_null=True)
    speedup_compile = serializers.FloatField(allow_null=True)
    backend = serializers.CharField()
    precision = serializers.CharField(help_text="The board's: every row of a board has it.")
    date = serializers.DateTimeField()


class FlaggedRowSerializer(serializers.Serializer):
    participant = serializers.CharField()
    participant_key = serializers.CharField()
    evaluation_id = serializers.IntegerField()
    candidate_ms = serializers.FloatField(allow_null=True)
    flags = serializers.ListField(child=serializers.CharField())
    date = serializers.DateTimeField()


class RecordRowSerializer(BoardFieldsSerializer):
    problem = serializers.CharField()
    level = serializers.IntegerField()
    number = serializers.IntegerField()
    hardware = serializers.CharField()
    participant = serializers.CharField()
    participant_key = serializers.CharField()
    submission_id = serializers.IntegerField()
    candidate_ms = serializers.FloatField()
    previous_ms = serializers.FloatField(allow_null=True)
    speedup = serializers.FloatField(allow_null=True)
    date = serializers.DateTimeField()


class BoardSerializer(BoardFieldsSerializer):
    problem = ProblemRefSerializer()
    hardware = serializers.CharField()
    boards = BoardChoiceSerializer(
        many=True,
        help_text="The problem's boards on this hardware: the main one first, then those of "
        "other precisions someone has entered (ask for one with ?precision=).",
    )
    rows = BoardRowSerializer(many=True)
    flagged = FlaggedRowSerializer(many=True)
    records = RecordRowSerializer(many=True)


class SummaryFieldsSerializer(serializers.Serializer):
    hardware = serializers.CharField()
    level = serializers.IntegerField()
    baseline = serializers.CharField()
    problems = serializers.IntegerField(help_text="The level's problems: every rate's denominator.")
    attempted = serializers.IntegerField()
    compiled = serializers.IntegerField()
    correct = serializers.IntegerField()
    compile_rate = serializers.FloatField()
    correct_rate = serializers.FloatField()
    fast_p = serializers.DictField(child=serializers.FloatField(), help_text='{"0": .., "1": ..}')
    geomean_speedup = serializers.FloatField(allow_null=True)


class ModelRowSerializer(SummaryFieldsSerializer):
    model_id = serializers.IntegerField()
    model = serializers.CharField()
    litellm_name = serializers.CharField()


class ModelsTableSerializer(serializers.Serializer):
    rows = ModelRowSerializer(many=True)


class KernelBenchCountingSerializer(serializers.Serializer):
    counting = serializers.CharField(help_text="What this counting counts as correct.")
    correct = serializers.IntegerField()
    correct_rate = serializers.FloatField()
    fast_p = serializers.DictField(child=serializers.FloatField(), help_text='{"0": .., "1": ..}')
    geomean_speedup = serializers.FloatField(allow_null=True)


class RunRowSerializer(SummaryFieldsSerializer):
    counting = serializers.CharField(help_text="The strict counting's rule, in words.")
    kernelbench = KernelBenchCountingSerializer(
        help_text="The same rates by KernelBench's counting: correct outputs count even where "
        "the kernel's own backend did not do the work (backend_not_used); speedups as measured."
    )
    run_id = serializers.IntegerField()
    run = serializers.CharField()
    model = serializers.CharField()
    samples_per_problem = serializers.IntegerField()
    evaluated_samples = serializers.IntegerField()
    pass_at_k = serializers.DictField(child=serializers.FloatField(allow_null=True))


class EntryRowSerializer(BoardFieldsSerializer):
    problem = serializers.CharField()
    level = serializers.IntegerField()
    number = serializers.IntegerField()
    retired = serializers.BooleanField()
    hardware = serializers.CharField()
    rank = serializers.IntegerField(allow_null=True)
    candidate_ms = serializers.FloatField(allow_null=True)
    speedup = serializers.FloatField(allow_null=True)
    speedup_eager = serializers.FloatField(allow_null=True)
    speedup_compile = serializers.FloatField(allow_null=True)
    backend = serializers.CharField()
    submission_id = serializers.IntegerField(allow_null=True)
    evaluated = serializers.IntegerField()
    compiled = serializers.BooleanField()
    flags = serializers.ListField(child=serializers.CharField())
    date = serializers.DateTimeField(allow_null=True)


class ModelPageSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    litellm_name = serializers.CharField()
    summary = ModelRowSerializer(many=True)
    runs = RunRowSerializer(many=True)
    entries = EntryRowSerializer(many=True)


class UserPageSerializer(serializers.Serializer):
    username = serializers.CharField()
    entries = EntryRowSerializer(many=True)


class RunPageSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    model = serializers.CharField()
    hardware = serializers.CharField()
    summary = RunRowSerializer(many=True)


class RecordsSerializer(serializers.Serializer):
    rows = RecordRowSerializer(many=True)


class KernelBenchEntrySerializer(serializers.Serializer):
    sample_id = serializers.IntegerField()
    compiled = serializers.BooleanField()
    correctness = serializers.BooleanField()
    metadata = serializers.DictField()
    runtime = serializers.FloatField(help_text="Mean time in ms; -1.0 when not correct.")
    runtime_stats = serializers.DictField()


# ---- views ------------------------------------------------------------------------------------


class BoardApi(ApiMixin, APIView):
    """A board, its problem by slug (boards/level1/19_ReLU/h200/) or by level and number
    (BoardByNumberApi), found by problems.selectors.problem_by_name either way."""

    @extend_schema(
        operation_id="leaderboard_board",
        parameters=[BoardQuerySerializer, *PROBLEM_NAME],
        responses={200: BoardSerializer, 400: ApiErrorSerializer, 404: ApiErrorSerializer},
        description="A problem's board on a hardware, the problem by its slug "
        "(`level1/19_ReLU/h200/`) or by level and number (`level1/19/h200/`, `1/19/h200/`).",
    )
    def get(
        self, request, level: int, hardware: str, name: str = "", number: int | None = None
    ) -> Response:
        precision = _query(BoardQuerySerializer, request).get("precision")
        problem = problem_by_name(
            Problem.objects.visible_to(request.user), level=level, name=name, number=number
        )
        if problem is None:
            asked = asked_name(level=level, name=name, number=number)
            raise exceptions.NotFound(f"There is no problem {asked}.")
        hw = get_object_or_404(Hardware, slug=hardware)
        board = {"problem": problem, "hardware": hw,
                 "precision": selectors.board_precision(problem, precision)}
        data = {
            "problem": problem,
            "hardware": hw.slug,
            **selectors.board_fields(board["precision"], problem.precision),
            "boards": selectors.problem_boards(problem=problem, hardware=hw),
            "rows": selectors.board_rows(**board),
            "flagged": selectors.flagged_rows(**board),
            "records": selectors.record_rows(**board),
        }
        return Response(BoardSerializer(data).data)


class BoardByNumberApi(BoardApi):
    """The same at boards/<level>/<number>/<hardware>/: its own operation in the schema."""

    @extend_schema(
        operation_id="leaderboard_board_by_number",
        parameters=[BoardQuerySerializer],
        responses={200: BoardSerializer, 400: ApiErrorSerializer, 404: ApiErrorSerializer},
        description="A problem's board by its level and number; the same as by its slug.",
    )
    def get(self, request, level: int, number: int, hardware: str) -> Response:
        return super().get(request, level=level, number=number, hardware=hardware)


class ModelsTableApi(ApiMixin, APIView):
    @extend_schema(
        operation_id="leaderboard_models",
        parameters=[TableQuerySerializer],
        responses={200: ModelsTableSerializer, 400: ApiErrorSerializer},
    )
    def get(self, request) -> Response:
        query = _query(TableQuerySerializer, request)
        rows = selectors.models_table(
            hardware=query.get("hardware"), level=query.get("level"), baseline=query["baseline"]
        )
        return Response(ModelsTableSerializer({"rows": rows}).data)


class ModelApi(ApiMixin, APIView):
    @extend_schema(
        operation_id="leaderboard_model",
        parameters=[BaselineQuerySerializer],
        responses={200: ModelPageSerializer, 400: ApiErrorSerializer, 404: ApiErrorSerializer},
    )
    def get(self, request, pk: int) -> Response:
        model = get_object_or_404(Model, pk=pk)
        baseline = _query(BaselineQuerySerializer, request)["baseline"]
        runs = [
            row
            for run in Run.objects.filter(model=model).select_related("hardware", "model")
            for row in selectors.run_summary(run, baseline=baseline)
        ]
        data = {
            "id": model.pk,
            "name": str(model),
            "litellm_name": model.litellm_name,
            "summary": selectors.models_table(model_id=model.pk, baseline=baseline),
            "runs": runs,
            "entries": selectors.participant_entries(model=model),
        }
        return Response(ModelPageSerializer(data).data)


class RunApi(ApiMixin, APIView):
    @extend_schema(
        operation_id="leaderboard_run",
        parameters=[BaselineQuerySerializer],
        responses={200: RunPageSerializer, 400: ApiErrorSerializer, 404: ApiErrorSerializer},
    )
    def get(self, request, pk: int) -> Response:
        run = get_object_or_404(Run.objects.select_related("model", "hardware"), pk=pk)
        baseline = _query(BaselineQuerySerializer, request)["baseline"]
        data = {
            "id": run.pk,
            "name": run.name,
            "model": str(run.model),
            "hardware": run.hardware.slug,
            "summary": selectors.run_summary(run, baseline=baseline),
        }
        return Response(RunPageSerializer(data).data)


class RunEvalResultsApi(ApiMixin, APIView):
    @extend_schema(
        operation_id="leaderboard_run_eval_results",
        parameters=[EvalResultsQuerySerializer],
        responses={
            200: serializers.DictField(child=KernelBenchEntrySerializer(many=True)),
            400: ApiErrorSerializer,
            404: ApiErrorSerializer,
        },
        description="The run in KernelBench's eval_results.json layout, keyed by problem "
        "number within the level.",
    )
    def get(self, request, pk: int) -> Response:
        run = get_object_or_404(Run.objects.select_related("hardware"), pk=pk)
        level = _query(EvalResultsQuerySerializer, request).get("level")
        try:
            data = selectors.run_eval_results(run, level=level, viewer=request.user)
        except ValueError as error:
            return Response(error_body(str(error), "bad_level"), status=400)
        return Response(data)


class UserApi(ApiMixin, APIView):
    @extend_schema(
        operation_id="leaderboard_user",
        responses={200: UserPageSerializer, 404: ApiErrorSerializer},
    )
    def get(self, request, username: str) -> Response:
        person = get_object_or_404(get_user_model(), username=username)
        data = {"username": person.username, "entries": selectors.participant_entries(user=person)}
        return Response(UserPageSerializer(data).data)


class RecordsApi(ApiMixin, APIView):
    @extend_schema(
        operation_id="leaderboard_records",
        parameters=[RecordsQuerySerializer],
        responses={200: RecordsSerializer, 400: ApiErrorSerializer},
    )
    def get(self, request) -> Response:
        query = _query(RecordsQuerySerializer, request)
        rows = selectors.recent_records(
            limit=query["limit"], hardware=query.get("hardware"), precision=query.get("precision")
        )
        return Response(RecordsSerializer({"rows": rows}).data)
