"""The API's one error shape, {detail, code[, allowed, errors, retry_after, line]}: the body,
the exception handler that gives every error of every app's endpoints that shape, and the
schema's description of it. Plain DRF: no app of the site is needed to answer an error."""

import logging
import math

from django.core.exceptions import PermissionDenied
from django.db import InterfaceError, OperationalError
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import set_rollback

log = logging.getLogger(__name__)

# A locked or unreachable database: the client should retry after this many seconds (with its
# Idempotency-Key, so a request that did get through is not stored twice).
DATABASE_RETRY_AFTER = 5


class ApiErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What went wrong, in plain words.")
    code = serializers.CharField(help_text="A stable code: too_large, not_utf8, retired, ...")
    allowed = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="The values that would have been accepted, where there is a fixed set.",
    )
    errors = serializers.JSONField(
        required=False, help_text="Per-field (or, for a batch, per-item) errors."
    )
    retry_after = serializers.IntegerField(required=False, help_text="Seconds, when throttled.")
    line = serializers.IntegerField(
        required=False, help_text="For a syntax_error: the source's line (1-based)."
    )
    quota = serializers.JSONField(
        required=False,
        help_text="For quota_gpu_seconds: budget, used and reserved (by your waiting or running "
        "submissions) evaluation seconds today, needed (this request's estimate), waiting, "
        "frees_at (when enough is expected to free) and resets_at.",
    )


def error_body(detail: str, code: str, **extra) -> dict:
    return {"detail": detail, "code": code, **{k: v for k, v in extra.items() if v is not None}}


def database_unavailable_body() -> dict:
    return error_body(
        "The database is busy or unreachable; nothing was changed. Retry in a few seconds "
        "(with the same Idempotency-Key when submitting).",
        "database_unavailable",
        retry_after=DATABASE_RETRY_AFTER,
    )


def api_exception_handler(exc, context) -> Response | None:
    """Every API error has one shape: {detail, code[, allowed, errors, retry_after]}."""
    if isinstance(exc, (OperationalError, InterfaceError)):
        log.warning("database unavailable: %s", exc)
        set_rollback()
        return Response(
            database_unavailable_body(),
            status=503,
            headers={"Retry-After": str(DATABASE_RETRY_AFTER)},
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    if not isinstance(exc, exceptions.APIException):
        return None
    headers = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header
    if isinstance(exc, exceptions.ValidationError):
        body = error_body("The request is not valid; see `errors`.", "invalid", errors=exc.detail)
    else:
        body = error_body(str(exc.detail), getattr(exc.detail, "code", exc.default_code))
    if isinstance(exc, exceptions.Throttled):
        wait = max(1, math.ceil(exc.wait or 1))
        headers["Retry-After"] = str(wait)
        body["retry_after"] = wait
    set_rollback()
    return Response(body, status=exc.status_code, headers=headers)


# The error answers endpoints list in the schema (extend_schema(responses=...)).
ERRORS = {
    401: OpenApiResponse(ApiErrorSerializer, description="No or a bad token."),
    403: OpenApiResponse(ApiErrorSerializer, description="The token lacks the scope."),
    429: OpenApiResponse(
        ApiErrorSerializer, description="Throttled or over a quota; see Retry-After."
    ),
    503: OpenApiResponse(
        ApiErrorSerializer, description="The database is busy; retry after Retry-After."
    ),
}
NOT_FOUND = {404: OpenApiResponse(ApiErrorSerializer, description="No such object.")}
BAD_REQUEST = {400: OpenApiResponse(ApiErrorSerializer, description="Invalid input.")}
