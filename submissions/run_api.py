"""REST API for model runs: list and create (and start), read one, start, stop, resume.

Creating and steering runs spends money at a provider, so it is for staff only; reading is
public, like the run pages.
"""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny, IsAdminUser
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation.models import Hardware
from submissions.models import Model, Run
from submissions.runs import (
    RunError,
    run_create,
    run_fast_p,
    run_progress,
    run_resume,
    run_start,
    run_stop,
)


class RunCreateInputSerializer(serializers.Serializer):
    model = serializers.CharField(help_text="The model's litellm name, as registered.")
    name = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")
    problems = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Problem slugs."
    )
    level = serializers.IntegerField(required=False, min_value=1)
    tag = serializers.CharField(required=False)
    backend = serializers.CharField()
    hardware = serializers.CharField(help_text="Hardware slug.")
    precision = serializers.CharField(default="fp32")
    samples_per_problem = serializers.IntegerField(default=1)
    temperature = serializers.FloatField(default=0.0)
    prompt_style = serializers.CharField(default=Run.PromptStyle.ONE_SHOT)
    refinement_turns = serializers.IntegerField(default=0)
    start = serializers.BooleanField(default=True, help_text="Start generating at once.")


class ProgressSerializer(serializers.Serializer):
    status = serializers.CharField()
    problems = serializers.IntegerField()
    planned_steps = serializers.IntegerField()
    pending = serializers.IntegerField()
    generated = serializers.IntegerField()
    done = serializers.IntegerField()
    no_code = serializers.IntegerField()
    failed = serializers.IntegerField()
    submissions = serializers.IntegerField()
    evaluated = serializers.IntegerField()
    correct = serializers.IntegerField()


class FastPRowSerializer(serializers.Serializer):
    level = serializers.IntegerField()
    problems = serializers.IntegerField()
    correct = serializers.IntegerField()
    fast_p = serializers.DictField(
        child=serializers.FloatField(), help_text='Share per threshold p ("0", "1", "1.5"...).'
    )
    geomean_speedup = serializers.FloatField(allow_null=True)


class RunOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    model = serializers.CharField(source="model.litellm_name")
    status = serializers.CharField()
    backend = serializers.CharField()
    hardware = serializers.CharField(source="hardware.slug")
    precision = serializers.CharField()
    samples_per_problem = serializers.IntegerField()
    temperature = serializers.FloatField()
    prompt_style = serializers.CharField()
    refinement_turns = serializers.IntegerField()
    problems = serializers.SlugRelatedField(slug_field="slug", many=True, read_only=True)
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost_usd = serializers.FloatField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    progress = serializers.SerializerMethodField()
    fast_p = serializers.SerializerMethodField()

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, run: Run) -> dict:
        return run_progress(run)

    @extend_schema_field(FastPRowSerializer(many=True))
    def get_fast_p(self, run: Run) -> list[dict]:
        return [
            {
                "level": row.level,
                "problems": row.problems,
                "correct": row.correct,
                "fast_p": {f"{p:g}": value for p, value in row.fast_p.items()},
                "geomean_speedup": row.geomean_speedup,
            }
            for row in run_fast_p(run)
        ]


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    detail = serializers.CharField()
    allowed = serializers.ListField(child=serializers.CharField(), required=False)


def _error(error: RunError) -> Response:
    body = {"code": error.code, "detail": error.message}
    if error.allowed:
        body["allowed"] = error.allowed
    code = status.HTTP_409_CONFLICT if error.code == "bad_state" else status.HTTP_400_BAD_REQUEST
    return Response(body, status=code)


def _runs():
    return Run.objects.select_related("model", "hardware").prefetch_related("problems")


class RunListCreateApi(APIView):
    def get_permissions(self):
        return [AllowAny()] if self.request.method == "GET" else [IsAdminUser()]

    @extend_schema(responses=RunOutputSerializer(many=True), summary="The latest runs")
    def get(self, request):
        runs = _runs()
        model = request.query_params.get("model")
        if model:
            runs = runs.filter(model__litellm_name=model)
        state = request.query_params.get("status")
        if state:
            runs = runs.filter(status=state)
        return Response(RunOutputSerializer(runs[:100], many=True).data)

    @extend_schema(
        request=RunCreateInputSerializer,
        responses={201: RunOutputSerializer, 400: ErrorSerializer},
        summary="Create a run (and start it unless start is false)",
    )
    def post(self, request):
        data = RunCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        start = values.pop("start")
        model = Model.objects.filter(litellm_name=values.pop("model")).first()
        if model is None:
            known = list(Model.objects.filter(active=True).values_list("litellm_name", flat=True))
            return _error(RunError("Unknown model.", code="unknown_model", allowed=known))
        hardware = Hardware.objects.filter(slug=values.pop("hardware")).first()
        if hardware is None:
            known = list(Hardware.objects.values_list("slug", flat=True))
            return _error(RunError("Unknown hardware.", code="unknown_hardware", allowed=known))
        try:
            run = run_create(model=model, hardware=hardware, user=request.user, **values)
            if start:
                run = run_start(run=run)
        except RunError as error:
            return _error(error)
        return Response(
            RunOutputSerializer(_runs().get(pk=run.pk)).data, status=status.HTTP_201_CREATED
        )


class RunDetailApi(APIView):
    permission_classes = [AllowAny]

    @extend_schema(responses=RunOutputSerializer, summary="One run, its progress and fast_p")
    def get(self, request, pk: int):
        return Response(RunOutputSerializer(get_object_or_404(_runs(), pk=pk)).data)


class _RunActionApi(APIView):
    permission_classes = [IsAdminUser]
    action = staticmethod(run_start)

    def post(self, request, pk: int):
        run = get_object_or_404(Run, pk=pk)
        try:
            self.action(run=run)
        except RunError as error:
            return _error(error)
        return Response(RunOutputSerializer(_runs().get(pk=pk)).data)


_ACTION_RESPONSES = {200: RunOutputSerializer, 409: OpenApiResponse(ErrorSerializer)}


class RunStartApi(_RunActionApi):
    action = staticmethod(run_start)

    @extend_schema(request=None, responses=_ACTION_RESPONSES, summary="Start a pending run")
    def post(self, request, pk: int):
        return super().post(request, pk)


class RunStopApi(_RunActionApi):
    action = staticmethod(run_stop)

    @extend_schema(request=None, responses=_ACTION_RESPONSES, summary="Stop a run")
    def post(self, request, pk: int):
        return super().post(request, pk)


class RunResumeApi(_RunActionApi):
    action = staticmethod(run_resume)

    @extend_schema(
        request=None,
        responses=_ACTION_RESPONSES,
        summary="Resume a stopped run; finished steps are never asked again",
    )
    def post(self, request, pk: int):
        return super().post(request, pk)
