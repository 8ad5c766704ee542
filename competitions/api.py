"""REST API of competitions (/api/v1/competitions/...): the list, one competition with its rules
and standings, and entering a kernel. Authentication, scopes, throttles and the error shape are
the rest of the API's (accounts.api.ApiMixin)."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api import ApiMixin
from competitions.models import Competition
from competitions.services import CompetitionError, competition_standings, competition_submit
from kbsite.api_errors import ApiErrorSerializer, error_body
from submissions.api import submission_error_response
from submissions.errors import SubmissionError
from submissions.serializers import BackendField, submission_urls


def _visible(request):
    competitions = Competition.objects.select_related("hardware")
    return competitions if request.user.is_staff else competitions.filter(published=True)


# ---- output -----------------------------------------------------------------------------------


class CompetitionSerializer(serializers.Serializer):
    slug = serializers.SlugField()
    title = serializers.CharField()
    hardware = serializers.CharField(source="hardware.slug")
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField()
    phase = serializers.SerializerMethodField()
    frozen = serializers.BooleanField(source="is_frozen")

    def get_phase(self, competition: Competition) -> str:
        return competition.phase()


class StandingSerializer(serializers.Serializer):
    rank = serializers.IntegerField(
        allow_null=True, help_text="Null for an entrant with no point yet: listed, not ranked."
    )
    user = serializers.CharField()
    points = serializers.IntegerField()
    solved = serializers.IntegerField()
    reached_at = serializers.CharField(allow_null=True)
    problems = serializers.DictField(
        help_text="Per problem slug tried: rank, points, median_ms, speedup, attempts, and "
        "submission_id where a kernel ranks."
    )


class CompetitionDetailSerializer(CompetitionSerializer):
    description = serializers.CharField()
    problems = serializers.SerializerMethodField()
    backends = serializers.ListField(child=serializers.CharField())
    precisions = serializers.ListField(child=serializers.CharField())
    daily_limit = serializers.IntegerField()
    code_hidden = serializers.BooleanField()
    scoring = serializers.SerializerMethodField()
    standings = StandingSerializer(many=True)

    def get_problems(self, competition: Competition) -> list[str]:
        problems = competition.problems.visible_to(self.context.get("user"))
        return list(problems.order_by("level", "number").values_list("slug", flat=True))

    def get_scoring(self, competition: Competition) -> str:
        return "rank_points"


class CompetitionListSerializer(serializers.Serializer):
    results = CompetitionSerializer(many=True)


class EntryOutSerializer(serializers.Serializer):
    """An entry; its URLs absolute, as the submissions API gives them (submission_urls)."""

    entry_id = serializers.IntegerField(source="pk")
    submission_id = serializers.IntegerField()
    submission_url = serializers.SerializerMethodField(help_text="The submission's page.")
    url = serializers.SerializerMethodField(
        help_text="The submission in the API: poll it (its `settled`) for the outcome."
    )
    events_url = serializers.SerializerMethodField(
        help_text="Server-sent events of the submission until it is settled."
    )
    stream_url = serializers.SerializerMethodField(help_text="A websocket with the same events.")
    after_deadline = serializers.BooleanField()

    def _urls(self, entry) -> dict:
        return submission_urls(self.context["request"], entry.submission)

    def get_submission_url(self, entry) -> str:
        return self._urls(entry)["page_url"]

    def get_url(self, entry) -> str:
        return self._urls(entry)["url"]

    def get_events_url(self, entry) -> str:
        return self._urls(entry)["events_url"]

    def get_stream_url(self, entry) -> str:
        return self._urls(entry)["stream_url"]


# ---- input ------------------------------------------------------------------------------------


class EntryInSerializer(serializers.Serializer):
    problem = serializers.CharField(help_text="The problem's slug, e.g. level1/19_ReLU.")
    source = serializers.CharField(trim_whitespace=False)
    backend = BackendField()
    precision = serializers.CharField(default="fp32")
    filename = serializers.CharField(required=False, default="", allow_blank=True)


# ---- views ------------------------------------------------------------------------------------


class CompetitionListApi(ApiMixin, APIView):
    @extend_schema(operation_id="competitions_list", responses={200: CompetitionListSerializer})
    def get(self, request) -> Response:
        return Response(CompetitionListSerializer({"results": list(_visible(request))}).data)


class CompetitionDetailApi(ApiMixin, APIView):
    @extend_schema(
        operation_id="competitions_detail",
        responses={200: CompetitionDetailSerializer, 404: ApiErrorSerializer},
    )
    def get(self, request, slug: str) -> Response:
        competition = get_object_or_404(_visible(request), slug=slug)
        competition.standings = competition_standings(competition)
        return Response(
            CompetitionDetailSerializer(competition, context={"user": request.user}).data
        )


class CompetitionEntryApi(ApiMixin, APIView):
    @extend_schema(
        operation_id="competitions_enter",
        request=EntryInSerializer,
        responses={
            201: EntryOutSerializer,
            400: ApiErrorSerializer,
            401: ApiErrorSerializer,
            404: ApiErrorSerializer,
            429: ApiErrorSerializer,
        },
    )
    def post(self, request, slug: str) -> Response:
        competition = get_object_or_404(_visible(request), slug=slug)
        data = EntryInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        problems = competition.problems.visible_to(request.user)
        problem = problems.filter(slug=data.validated_data["problem"]).first()
        if problem is None:
            return Response(
                error_body(
                    f"{data.validated_data['problem']} is not a problem of this competition.",
                    "problem_not_in_competition",
                ),
                status=status.HTTP_400_BAD_REQUEST,
            )
        try:
            entry = competition_submit(
                competition=competition,
                user=request.user,
                problem=problem,
                source=data.validated_data["source"],
                backend=data.validated_data["backend"],
                precision=data.validated_data["precision"],
                filename=data.validated_data["filename"],
            )
        except SubmissionError as error:
            return submission_error_response(error)
        except CompetitionError as error:
            code = {"daily_limit": 429, "login_required": 401}.get(error.code, 400)
            return Response(error_body(error.message, error.code), status=code)
        return Response(EntryOutSerializer(entry, context={"request": request}).data,
                        status=status.HTTP_201_CREATED)
