"""REST API for model runs: list and create (and start), read one, start, stop, resume.

Creating and steering runs spends money at a provider, so it is for staff only; reading is
public, like the run pages.
"""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.permissions import SAFE_METHODS, IsAdminUser
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api import ApiMixin
from evaluation.models import Hardware
from kbsite.api_errors import ApiErrorSerializer, error_body
from submissions.runs.models import Model, Run
from submissions.runs.selectors import run_fast_p, run_progress
from submissions.runs.services import RunError, run_create, run_resume, run_start, run_stop
from submissions.serializers import BackendField


class RunCreateInputSerializer(serializers.Serializer):
    model = serializers.CharField(help_text="The model's litellm name, as registered.")
    name = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")
    problems = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Problem slugs."
    )
    level = serializers.IntegerField(required=False, min_value=1)
    tag = serializers.CharField(required=False)
    backend = BackendField()
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
    problems = serializers.SerializerMethodField(help_text="Problem slugs.")
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost_usd = serializers.FloatField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    progress = serializers.SerializerMethodField()
    fast_p = serializers.SerializerMethodField(
        help_text="Strict counting: correct, no exploit flag, re-verified where it set a record."
    )
    fast_p_kernelbench = serializers.SerializerMethodField(
        help_text="The same by KernelBench's counting: correct outputs count even where the "
        "kernel's own backend did not do the work (backend_not_used); speedups as measured."
    )

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_problems(self, run: Run) -> list[str]:
        return [problem.slug for problem in run.problems.all()]

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, run: Run) -> dict:
        return run_progress(run)

    @extend_schema_field(FastPRowSerializer(many=True))
    def get_fast_p(self, run: Run, counting: str = "strict") -> list[dict]:
        return [
            {
                "level": row.level,
                "problems": row.problems,
                "correct": row.correct,
                "fast_p": {f"{p:g}": value for p, value in row.fast_p.items()},
                "geomean_speedup": row.geomean_speedup,
            }
            for row in run_fast_p(run, counting=counting)
        ]

    @extend_schema_field(FastPRowSerializer(many=True))
    def get_fast_p_kernelbench(self, run: Run) -> list[dict]:
        return self.get_fast_p(run, counting="kernelbench")


ERRORS = {
    400: OpenApiResponse(ApiErrorSerializer, description="Invalid input."),
    401: OpenApiResponse(ApiErrorSerializer, description="No or a bad token."),
    403: OpenApiResponse(ApiErrorSerializer, description="Staff only, with the submit scope."),
}
ACTION_ERRORS = {
    404: OpenApiResponse(ApiErrorSerializer, description="No such run."),
    409: OpenApiResponse(ApiErrorSerializer, description="Not in a state that allows it."),
    **ERRORS,
}


def _error(error: RunError) -> Response:
    code = status.HTTP_409_CONFLICT if error.code == "bad_state" else status.HTTP_400_BAD_REQUEST
    return Response(error_body(error.message, error.code, allowed=error.allowed), status=code)


def _runs():
    return Run.objects.select_related("model", "hardware").prefetch_related("problems")


class RunListCreateApi(ApiMixin, APIView):
    def get_permissions(self):
        staff = [] if self.request.method in SAFE_METHODS else [IsAdminUser()]
        return [*staff, *super().get_permissions()]

    @extend_schema(
        operation_id="runs_list",
        parameters=[
            OpenApiParameter("model", str, description="A model's litellm name."),
            OpenApiParameter("status", str, enum=Run.Status.values),
        ],
        responses={200: RunOutputSerializer(many=True), **ERRORS},
        description="The latest 100 runs, newest first.",
    )
    def get(self, request) -> Response:
        runs = _runs()
        if request.query_params.get("model"):
            runs = runs.filter(model__litellm_name=request.query_params["model"])
        if request.query_params.get("status"):
            runs = runs.filter(status=request.query_params["status"])
        return Response(RunOutputSerializer(runs[:100], many=True).data)

    @extend_schema(
        operation_id="runs_create",
        request=RunCreateInputSerializer,
        responses={201: RunOutputSerializer, **ERRORS},
        description="Create a run of a registered model over problems (a list of slugs, a "
        "level or a tag), and start it unless `start` is false. Staff only.",
    )
    def post(self, request) -> Response:
        data = RunCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        start = values.pop("start")
        model = Model.objects.filter(litellm_name=values.pop("model")).first()
        if model is None:
            known = list(Model.objects.filter(active=True).values_list("litellm_name", flat=True))
            return _error(RunError("No model of that name is registered.", code="unknown_model",
                                   allowed=known))
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


class RunDetailApi(ApiMixin, APIView):
    @extend_schema(
        operation_id="runs_retrieve",
        responses={200: RunOutputSerializer, **ACTION_ERRORS},
        description="One run: its settings, progress, tokens, cost and fast_p per level.",
    )
    def get(self, request, pk: int) -> Response:
        return Response(RunOutputSerializer(get_object_or_404(_runs(), pk=pk)).data)


class _RunActionApi(ApiMixin, APIView):
    service = staticmethod(run_start)

    def get_permissions(self):
        return [IsAdminUser(), *super().get_permissions()]

    def post(self, request, pk: int) -> Response:
        run = get_object_or_404(Run, pk=pk)
        try:
            self.service(run=run)
        except RunError as error:
            return _error(error)
        return Response(RunOutputSerializer(_runs().get(pk=pk)).data)


class RunStartApi(_RunActionApi):
    service = staticmethod(run_start)

    @extend_schema(operation_id="runs_start", request=None,
                   responses={200: RunOutputSerializer, **ACTION_ERRORS},
                   description="Start a pending run. Staff only.")
    def post(self, request, pk: int) -> Response:
        return super().post(request, pk)


class RunStopApi(_RunActionApi):
    service = staticmethod(run_stop)

    @extend_schema(operation_id="runs_stop", request=None,
                   responses={200: RunOutputSerializer, **ACTION_ERRORS},
                   description="Stop a run: queued steps are not asked; a call already made "
                   "is kept. Staff only.")
    def post(self, request, pk: int) -> Response:
        return super().post(request, pk)


class RunResumeApi(_RunActionApi):
    service = staticmethod(run_resume)

    @extend_schema(operation_id="runs_resume", request=None,
                   responses={200: RunOutputSerializer, **ACTION_ERRORS},
                   description="Resume a stopped run; finished steps are never asked again. "
                   "Staff only.")
    def post(self, request, pk: int) -> Response:
        return super().post(request, pk)
