"""The REST API for people and agents (/api/v1/): explicit DRF views over the services."""

import logging

from django.conf import settings
from django.db.models import Q
from django.http import HttpResponsePermanentRedirect, JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, generics
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param
from rest_framework.views import APIView

from accounts.api import ApiMixin
from accounts.authentication import TokenScopes
from kbsite.api_errors import (
    BAD_REQUEST,
    ERRORS,
    NOT_FOUND,
    ApiErrorSerializer,
    error_body,
)
from kbsite.parsers import JSONParser
from problems.models import Problem
from problems.selectors import asked_name, problem_by_name
from submissions import serializers as s
from submissions.cancellations import CancelError, batch_cancel, submission_cancel
from submissions.errors import BatchError, SubmissionError
from submissions.models import Batch, Submission
from submissions.ncu_reports import NcuRequestError, ncu_report_request
from submissions.quotas import QuotaExceeded, quota_usage
from submissions.reverifications import ReverificationError, reverification_request_by_owner
from submissions.selectors import (
    can_act_on,
    can_see_reference,
    can_see_source,
    can_see_submission,
    hardware_overview,
    user_submissions,
)
from submissions.services import (
    BATCH_MAX,
    submission_create,
    submission_create_batch,
    submission_resolve,
)
from submissions.sources import decode_source

log = logging.getLogger(__name__)

# How SubmissionError codes answer over HTTP; anything else is a plain 400.
ERROR_STATUS = {
    "too_large": 413,
    "retired": 409,
    "forbidden": 403,
    "quota_queued": 429,
    "quota_gpu_seconds": 429,
}
# JSON may escape every character of the source as \uXXXX (6 bytes), plus the other fields.
BODY_SLACK = 64 * 1024


def single_body_limit() -> int:
    return settings.SUBMISSION_MAX_BYTES * 6 + BODY_SLACK


def batch_body_limit() -> int:
    return single_body_limit() * BATCH_MAX


def submission_error_response(error: SubmissionError) -> Response:
    headers = {}
    if error.retry_after:
        headers["Retry-After"] = str(error.retry_after)
    return Response(
        error_body(
            error.message,
            error.code,
            allowed=error.allowed,
            retry_after=error.retry_after,
            line=getattr(error, "line", None),  # a SourceError's
            quota=error.figures,
        ),
        status=ERROR_STATUS.get(error.code, 400),
        headers=headers,
    )


@csrf_exempt  # it changes nothing, and a POST to a wrong path deserves a 404, not a CSRF 403
def not_found(request, *args, **kwargs):
    """The API's 404 for paths no endpoint matches, in the API's error shape.

    As this route matches every path under /api/, it does what APPEND_SLASH would have done:
    a GET of a known endpoint without its trailing slash is redirected to it.
    """
    if request.method in ("GET", "HEAD") and not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
        except Resolver404:
            match = None
        if match is not None and match.url_name != "api_not_found":
            query = request.META.get("QUERY_STRING", "")
            target = request.path + "/" + (f"?{query}" if query else "")
            return HttpResponsePermanentRedirect(target)
    return JsonResponse(
        error_body(f"There is no API endpoint at {request.path}.", "not_found"), status=404
    )


def check_body_size(request, limit: int) -> None:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit:
        # Named by the limit a user acts on, the source's: the body's is made from it, and only
        # sources over it (or many at once) make a body this large.
        raise BodyTooLarge(f"The request body is {length} bytes, too large for sources of at "
                           f"most {settings.SUBMISSION_MAX_BYTES} bytes each.")


class BodyTooLarge(exceptions.APIException):
    status_code = 413
    default_code = "too_large"


def query_int(request, name: str, *, minimum: int) -> int | None:
    """A whole-number query parameter given at most once, or None when absent; else a 400."""
    values = request.query_params.getlist(name)
    if not values:
        return None
    if len(values) > 1:
        raise exceptions.ValidationError({name: ["Give this parameter once."]})
    try:
        value = int(values[0])
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise exceptions.ValidationError({name: [f"A whole number of at least {minimum}."]})
    return value


def query_filters(serializer_class, request) -> dict:
    """The validated filters of a list; a filter given twice is an error, not a silent pick."""
    repeated = [
        name for name in serializer_class().fields if len(request.query_params.getlist(name)) > 1
    ]
    if repeated:
        raise exceptions.ValidationError({name: ["Give this parameter once."] for name in repeated})
    # A plain dict, not the QueryDict: DRF would treat `?level=` like an empty form field and
    # ignore it, where a number was asked for.
    data = {key: request.query_params[key] for key in request.query_params}
    filters = serializer_class(data=data)
    filters.is_valid(raise_exception=True)
    return filters.validated_data


class Pagination(LimitOffsetPagination):
    """limit/offset paging that refuses a malformed value (400) instead of ignoring it.

    `page_size` and `page` (from 1), as page-numbered clients send them, are read as the
    same thing: page_size is the limit, page p starts at (p - 1) * limit. Above max_limit a
    limit is max_limit.
    """

    default_limit = 100
    max_limit = 1000
    page_size_query_param = "page_size"
    page_query_param = "page"

    def _either(self, request, name: str, alias: str, *, minimum: int) -> int | None:
        value = query_int(request, name, minimum=minimum)
        other = query_int(request, alias, minimum=max(minimum, 1))
        if value is not None and other is not None:
            raise exceptions.ValidationError({alias: [f"Give {name} or {alias}, not both."]})
        return value if other is None else other

    def get_limit(self, request) -> int:
        value = self._either(request, self.limit_query_param, self.page_size_query_param,
                             minimum=1)
        return self.default_limit if value is None else min(value, self.max_limit)

    def get_offset(self, request) -> int:
        offset = query_int(request, self.offset_query_param, minimum=0)
        page = query_int(request, self.page_query_param, minimum=1)
        if offset is not None and page is not None:
            raise exceptions.ValidationError(
                {self.page_query_param: [f"Give {self.offset_query_param} or "
                                         f"{self.page_query_param}, not both."]}
            )
        if page is not None:
            return (page - 1) * self.get_limit(request)
        return offset or 0

    def _as_limit_offset(self, url: str | None) -> str | None:
        """The next and previous links speak limit/offset only (both sets would be a 400)."""
        for name in (self.page_size_query_param, self.page_query_param):
            url = url and remove_query_param(url, name)
        return url

    def get_next_link(self) -> str | None:
        return self._as_limit_offset(super().get_next_link())

    def get_previous_link(self) -> str | None:
        return self._as_limit_offset(super().get_previous_link())

    def get_schema_operation_parameters(self, view) -> list[dict]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.limit_query_param:
                parameter["schema"]["minimum"] = 1  # above max_limit it is max_limit
                parameter["description"] = (
                    f"Results per page, at most {self.max_limit} (more is {self.max_limit})."
                )
            elif parameter["name"] == self.offset_query_param:
                parameter["schema"]["minimum"] = 0
        return [
            *parameters,
            {
                "name": self.page_size_query_param,
                "required": False,
                "in": "query",
                "description": f"The same as `{self.limit_query_param}`.",
                "schema": {"type": "integer", "minimum": 1},
            },
            {
                "name": self.page_query_param,
                "required": False,
                "in": "query",
                "description": f"A page number from 1, instead of `{self.offset_query_param}`.",
                "schema": {"type": "integer", "minimum": 1},
            },
        ]


# ---- problems and hardware ----------------------------------------------------------------------


class ProblemListApi(ApiMixin, generics.ListAPIView):
    serializer_class = s.ProblemListSerializer
    pagination_class = Pagination

    @extend_schema(
        operation_id="problems_list",
        parameters=[s.ProblemFilterSerializer],
        responses={200: s.ProblemListSerializer(many=True), **BAD_REQUEST, **ERRORS},
        description="Problems, retired ones only when asked for by `status`. Drafts and held "
        "problems are listed to staff only.",
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        query = query_filters(s.ProblemFilterSerializer, self.request)
        problems = Problem.objects.visible_to(self.request.user).order_by("level", "number")
        if query.get("status"):
            problems = problems.filter(status=query["status"])
        else:
            problems = problems.exclude(status=Problem.Status.RETIRED)
        if query.get("level"):
            problems = problems.filter(level=query["level"])
        if query.get("q"):
            problems = problems.filter(
                Q(name__icontains=query["q"]) | Q(slug__icontains=query["q"])
            )
        return problems


# How a problem's routes name it (problems.selectors): the slug, or the level and number.
PROBLEM_NAME = [
    OpenApiParameter(
        "level", int, OpenApiParameter.PATH, description="The level, as in the slug: 1 of level1."
    ),
    OpenApiParameter(
        "name",
        str,
        OpenApiParameter.PATH,
        description="The slug after its level (19_ReLU of level1/19_ReLU), or the problem's "
        "number in the level (19).",
    ),
]


class ProblemDetailApi(ApiMixin, generics.RetrieveAPIView):
    """A problem by its slug (level1/19_ReLU/) or its level and number (1/19/, ProblemByNumber):
    problems.selectors.problem_by_name finds it either way."""

    serializer_class = s.ProblemDetailSerializer
    queryset = Problem.objects.select_related("current_version").prefetch_related(
        "baselines__hardware"
    )

    @extend_schema(
        operation_id="problems_retrieve",
        parameters=PROBLEM_NAME,
        responses={200: s.ProblemDetailSerializer, **NOT_FOUND, **ERRORS},
        description="One problem, by its slug (`level1/19_ReLU/`), with its reference source "
        "(null where its code is not public), tolerances and baselines. A draft or held problem "
        "is found by staff only. Also by level and number: `level1/19/`, or `1/19/`.",
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "user": self.request.user}

    def get_object(self):
        names = {key: self.kwargs.get(key) for key in ("level", "number")}
        names["name"] = self.kwargs.get("name", "")
        problem = problem_by_name(self.get_queryset().visible_to(self.request.user), **names)
        if problem is None:
            raise exceptions.NotFound(f"There is no problem {asked_name(**names)}.")
        return problem


class ProblemByNumberApi(ProblemDetailApi):
    """The same as ProblemDetailApi at /api/v1/problems/<level>/<number>/: its own operation in
    the schema, as an OpenAPI operation id names one path."""

    @extend_schema(
        operation_id="problems_retrieve_by_number",
        responses={200: s.ProblemDetailSerializer, **NOT_FOUND, **ERRORS},
        description="One problem by its level and number; the same as by its slug.",
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class HardwareListApi(ApiMixin, APIView):
    @extend_schema(
        operation_id="hardware_list",
        responses={200: s.HardwareSerializer(many=True), **ERRORS},
        description="Every hardware: what it runs, its queue and its online runners.",
    )
    def get(self, request) -> Response:
        return Response(s.HardwareSerializer(hardware_overview(), many=True).data)


# ---- submissions --------------------------------------------------------------------------------

IDEMPOTENCY = OpenApiParameter(
    "Idempotency-Key",
    location=OpenApiParameter.HEADER,
    required=False,
    description="A retried request with the same key returns the first request's submission.",
)
SUBMIT_ERRORS = {
    **BAD_REQUEST,
    409: OpenApiResponse(ApiErrorSerializer, description="The problem is retired."),
    413: OpenApiResponse(ApiErrorSerializer, description="The source is too large."),
    **ERRORS,
}


class SubmissionListCreateApi(ApiMixin, generics.ListAPIView):
    permission_classes = [IsAuthenticated, TokenScopes]
    parser_classes = [JSONParser, MultiPartParser]
    serializer_class = s.SubmissionListItemSerializer
    pagination_class = Pagination

    def get_queryset(self):
        filters = query_filters(s.SubmissionFilterSerializer, self.request)
        return user_submissions(user=self.request.user, filters=filters)

    @extend_schema(
        operation_id="submissions_list",
        parameters=[s.SubmissionFilterSerializer],
        responses={200: s.SubmissionListItemSerializer(many=True), **BAD_REQUEST, **ERRORS},
        description="Your own submissions, newest first.",
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="submissions_create",
        parameters=[IDEMPOTENCY],
        request={
            "application/json": s.SubmissionInputSerializer,
            "multipart/form-data": s.SubmissionUploadSerializer,
        },
        responses={202: s.AcceptedSerializer, **SUBMIT_ERRORS},
        description="Queue a kernel for evaluation. Answers at once (202) with where to poll "
        "(`url`), a server-sent event stream (`events_url`) and a websocket (`stream_url`).",
    )
    def post(self, request) -> Response:
        check_body_size(request, single_body_limit())
        multipart = request.content_type.startswith("multipart/")
        input_class = s.SubmissionUploadSerializer if multipart else s.SubmissionInputSerializer
        serializer = input_class(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        try:
            if multipart:
                upload = data.pop("file")
                data["source"] = decode_source(upload.read())
                data["filename"] = data.get("filename") or upload.name
            kwargs = submission_resolve(user=request.user, **data)
            submission = submission_create(
                user=request.user,
                idempotency_key=request.headers.get("Idempotency-Key", "").strip(),
                **kwargs,
            )
        except SubmissionError as error:
            return submission_error_response(error)
        body = s.AcceptedSerializer.build(request, submission)
        return Response(body, status=202, headers={"Location": body["url"]})


class SubmissionBatchApi(ApiMixin, APIView):
    permission_classes = [IsAuthenticated, TokenScopes]
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="submissions_batch",
        parameters=[IDEMPOTENCY],
        request=s.BatchInputSerializer,
        responses={202: s.BatchAcceptedSerializer, **SUBMIT_ERRORS},
        description=f"Up to {BATCH_MAX} submissions at once, all or none: when one is invalid "
        "none is stored, and `errors` lists each invalid item by its index. The status is "
        "that of the items' errors when they agree (413, 409), else 400.",
    )
    def post(self, request) -> Response:
        check_body_size(request, batch_body_limit())
        items = request.data.get("submissions") if isinstance(request.data, dict) else None
        if isinstance(items, list) and len(items) > BATCH_MAX:
            return Response(
                error_body(
                    f"A batch holds at most {BATCH_MAX} submissions, not {len(items)}.",
                    "batch_too_large",
                ),
                status=400,
            )
        serializer = s.BatchInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            batch, submissions = submission_create_batch(
                user=request.user,
                items=[dict(item) for item in serializer.validated_data["submissions"]],
                idempotency_key=request.headers.get("Idempotency-Key", "").strip(),
            )
        except SubmissionError as error:
            return submission_error_response(error)
        except BatchError as error:
            statuses = {ERROR_STATUS.get(item.code, 400) for _, item in error.errors}
            errors = [
                error_body(
                    item.message,
                    item.code,
                    index=index,
                    allowed=item.allowed,
                    line=getattr(item, "line", None),
                )
                for index, item in error.errors
            ]
            return Response(
                error_body(str(error), "invalid_batch", errors=errors),
                status=statuses.pop() if len(statuses) == 1 else 400,
            )
        body = {
            "batch": batch.pk,
            "batch_url": request.build_absolute_uri(f"/api/v1/batches/{batch.pk}/"),
            "submissions": [s.AcceptedSerializer.build(request, x) for x in submissions],
        }
        return Response(body, status=202)


class SubmissionDetailApi(ApiMixin, APIView):
    permission_classes = [IsAuthenticated, TokenScopes]

    @extend_schema(
        operation_id="submissions_retrieve",
        responses={200: s.SubmissionSerializer, **NOT_FOUND, **ERRORS},
        description="Status (queued, running, finished, cancelled), verdict and the full "
        "evaluation. "
        "The source and everything derived from it (error text, compiler output, traceback, "
        "logs, static report, profile, diagnosis, source hash) go to whoever may see the "
        "source: the owner and admins, others where the problem's code is public and no "
        "competition hides it; others get a generic error and nulls. Seeds: owner and admins.",
    )
    def get(self, request, pk: int) -> Response:
        submission = (
            Submission.objects.select_related("problem", "hardware", "user", "model")
            .filter(pk=pk)
            .first()
        )
        if submission is None or not can_see_submission(submission, request.user):
            raise exceptions.NotFound(f"There is no submission {pk}.")
        data = s.submission_data(
            request,
            submission,
            show_source=can_see_source(submission, request.user),
            show_reference=can_see_reference(submission, request.user),
            owner=can_act_on(submission, request.user),
        )
        return Response(s.SubmissionSerializer(data, context=data["visibility"]).data)


class SubmissionReverifyApi(ApiMixin, APIView):
    permission_classes = [IsAuthenticated, TokenScopes]

    @extend_schema(
        operation_id="submissions_reverify",
        request=None,
        responses={
            202: s.ReverificationSerializer,
            409: OpenApiResponse(ApiErrorSerializer, description="Not held (code not_held), "
                                 "or a re-verification is already open (already_open)."),
            **NOT_FOUND,
            **ERRORS,
        },
        description="Ask for another attempt at re-verification of a result held because its "
        "timing did not reproduce: evaluated again with fresh seeds (a third evaluation "
        "where the first two disagree), pending meanwhile. Owner and admins only; "
        "QUOTA_REVERIFICATIONS_PER_DAY per user and UTC day (429, code quota_reverifications). "
        "Follow the submission's `ranking` (or its events) to the outcome.",
    )
    def post(self, request, pk: int) -> Response:
        submission = Submission.objects.select_related("hardware", "problem").filter(pk=pk).first()
        if submission is None or not can_act_on(submission, request.user):
            raise exceptions.NotFound(f"You have no submission {pk}.")  # owner and staff only
        try:
            reverification = reverification_request_by_owner(
                user=request.user, submission=submission
            )
        except ReverificationError as error:
            return Response(error_body(error.message, error.code), status=409)
        except QuotaExceeded as error:
            return Response(
                error_body(error.message, error.code, retry_after=error.retry_after),
                status=429, headers={"Retry-After": str(error.retry_after)},
            )
        return Response(s.ReverificationSerializer(reverification).data, status=202)


# How a CancelError answers over HTTP.
CANCEL_STATUS = {"forbidden": 403, "already_ended": 409, "reverifying": 409}
CANCEL_ERRORS = {
    403: OpenApiResponse(ApiErrorSerializer, description="Not yours (code forbidden)."),
    409: OpenApiResponse(ApiErrorSerializer, description="Already finished or cancelled "
                         "(already_ended), or finished with its record being re-verified "
                         "(reverifying)."),
    **NOT_FOUND,
    **ERRORS,
}


class SubmissionCancelApi(ApiMixin, APIView):
    permission_classes = [IsAuthenticated, TokenScopes]

    @extend_schema(
        operation_id="submissions_cancel",
        request=None,
        responses={200: s.SubmissionSerializer, **CANCEL_ERRORS},
        description="Cancel a queued or running submission (a test run too): it is never "
        "claimed again and never ranks, its quota reservation is released, and a running one "
        "is stopped by its runner at the runner's next heartbeat (it is charged the time it "
        "ran). Answers the submission, status `cancelled`. Owner and admins only. A finished "
        "submission cannot be cancelled, nor a record's re-verification.",
    )
    def post(self, request, pk: int) -> Response:
        submission = (
            Submission.objects.select_related("problem", "hardware", "user", "model")
            .filter(pk=pk).first()
        )
        if submission is None or not can_see_submission(submission, request.user):
            raise exceptions.NotFound(f"There is no submission {pk}.")
        try:
            submission = submission_cancel(submission=submission, user=request.user)
        except CancelError as error:
            return Response(error_body(error.message, error.code),
                            status=CANCEL_STATUS.get(error.code, 400))
        data = s.submission_data(
            request, submission,
            show_source=can_see_source(submission, request.user),
            show_reference=can_see_reference(submission, request.user),
            owner=can_act_on(submission, request.user),
        )
        return Response(s.SubmissionSerializer(data, context=data["visibility"]).data)


def _own_batch(request, pk: int) -> Batch:
    """The batch, for its owner and staff; others get 404 (batches are not public)."""
    batch = Batch.objects.filter(pk=pk).first()
    user = request.user
    if batch is None or not (user.is_staff or (batch.user_id and batch.user_id == user.pk)):
        raise exceptions.NotFound(f"You have no batch {pk}.")
    return batch


class BatchDetailApi(ApiMixin, APIView):
    permission_classes = [IsAuthenticated, TokenScopes]

    @extend_schema(
        operation_id="batches_retrieve",
        responses={200: s.BatchSerializer, **NOT_FOUND, **ERRORS},
        description="A batch made by POST /api/v1/submissions/batch/: its status, how many of "
        "its submissions are in each status, and the submissions. Owner and admins only.",
    )
    def get(self, request, pk: int) -> Response:
        batch = _own_batch(request, pk)
        return Response(s.BatchSerializer(s.BatchSerializer.build(request, batch),
                                          context={"request": request}).data)


class BatchCancelApi(ApiMixin, APIView):
    permission_classes = [IsAuthenticated, TokenScopes]

    @extend_schema(
        operation_id="batches_cancel",
        request=None,
        responses={200: s.BatchSerializer, **CANCEL_ERRORS},
        description="Cancel every queued or running submission of a batch, as "
        "/api/v1/submissions/ID/cancel/ does one (those finished keep their results); the "
        "batch's status is `cancelled`. 409 when it was cancelled before and nothing of it "
        "waits or runs. Owner and admins only.",
    )
    def post(self, request, pk: int) -> Response:
        batch = _own_batch(request, pk)
        try:
            batch = batch_cancel(batch=batch, user=request.user)
        except CancelError as error:
            return Response(error_body(error.message, error.code),
                            status=CANCEL_STATUS.get(error.code, 400))
        return Response(s.BatchSerializer(s.BatchSerializer.build(request, batch),
                                          context={"request": request}).data)


class QuotaApi(ApiMixin, APIView):
    permission_classes = [IsAuthenticated, TokenScopes]

    @extend_schema(
        operation_id="quota_retrieve",
        responses={200: s.QuotaSerializer, **ERRORS},
        description="Your quotas and how much of them you use: submissions waiting or running "
        "at once, and evaluation seconds per UTC day. Over a quota, a submission is answered "
        "429 with the code quota_queued or quota_gpu_seconds. Also the size limit on a kernel "
        "file (max_source_bytes; over it, 413 too_large).",
    )
    def get(self, request) -> Response:
        usage = quota_usage(user=request.user)
        data = {
            "exempt": usage.exempt,
            "queued": usage.queued,
            "max_queued": usage.max_queued,
            "queued_left": usage.queued_left,
            "gpu_seconds": usage.gpu_seconds,
            "gpu_seconds_per_day": usage.gpu_seconds_per_day,
            "gpu_seconds_reserved": usage.gpu_seconds_reserved,
            "gpu_seconds_left": usage.gpu_seconds_left,
            "resets_at": usage.resets_at,
            "max_source_bytes": settings.SUBMISSION_MAX_BYTES,
        }
        return Response(s.QuotaSerializer(data).data)


# ---- Nsight Compute reports ---------------------------------------------------------------------


def _ncu_submission(request, pk: int, *, asking: bool = False) -> Submission:
    """The submission whose reports are read (by whoever may see its source: kernel names and
    figures tell about the code) or asked for (its owner and staff); others get 404."""
    submission = Submission.objects.select_related("hardware", "problem").filter(pk=pk).first()
    allowed = can_act_on if asking else can_see_source
    if submission is None or not allowed(submission, request.user):
        raise exceptions.NotFound(f"There is no submission {pk} of yours to profile.")
    return submission


class NcuReportListCreateApi(ApiMixin, APIView):
    permission_classes = [IsAuthenticated, TokenScopes]

    @extend_schema(
        operation_id="submissions_ncu_list",
        responses={200: s.NcuReportSerializer(many=True), **NOT_FOUND, **ERRORS},
        description="The submission's Nsight Compute reports, newest first (whoever may see "
        "its source: the owner and admins, others where its code is public).",
    )
    def get(self, request, pk: int) -> Response:
        submission = _ncu_submission(request, pk)
        reports = submission.ncu_reports.defer("report")[:20]
        return Response(s.NcuReportSerializer(reports, many=True,
                                              context={"request": request}).data)

    @extend_schema(
        operation_id="submissions_ncu_create",
        request=None,
        responses={
            202: s.NcuReportSerializer,
            409: OpenApiResponse(ApiErrorSerializer,
                                 description="Not evaluated yet, or a report is already open."),
            **NOT_FOUND,
            **ERRORS,
        },
        description="Queue an Nsight Compute report on the submission's own kernels: a runner "
        "of its hardware runs ncu in the kernel's sandbox (never during a timed evaluation) "
        "and stores the figures, ncu's text and the .ncu-rep file. A runner without ncu (or "
        "a CPU one) finishes it as `unavailable` with the reason. Owner and admins only; "
        "QUOTA_NCU_REPORTS_PER_DAY per user and UTC day (429, code quota_ncu_reports).",
    )
    def post(self, request, pk: int) -> Response:
        submission = _ncu_submission(request, pk, asking=True)
        try:
            report = ncu_report_request(user=request.user, submission=submission)
        except NcuRequestError as error:
            return Response(error_body(error.message, error.code), status=409)
        except QuotaExceeded as error:
            return Response(
                error_body(error.message, error.code, retry_after=error.retry_after),
                status=429, headers={"Retry-After": str(error.retry_after)},
            )
        return Response(s.NcuReportSerializer(report, context={"request": request}).data,
                        status=202)


class NcuReportDetailApi(ApiMixin, APIView):
    permission_classes = [IsAuthenticated, TokenScopes]

    @extend_schema(
        operation_id="submissions_ncu_retrieve",
        responses={200: s.NcuReportSerializer, **NOT_FOUND, **ERRORS},
        description="One Nsight Compute report (poll it until its status is no longer queued "
        "or running).",
    )
    def get(self, request, pk: int, report_pk: int) -> Response:
        submission = _ncu_submission(request, pk)
        report = submission.ncu_reports.defer("report").filter(pk=report_pk).first()
        if report is None:
            raise exceptions.NotFound(f"Submission {pk} has no report {report_pk}.")
        return Response(s.NcuReportSerializer(report, context={"request": request}).data)
