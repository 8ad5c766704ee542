"""The API's access, shared by every app's endpoints (ApiMixin: who calls, what a token may do,
how often, and the one error shape), and the token endpoints themselves (/api/v1/tokens/)."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import ApiTokenAuthentication, PasswordAuthentication, TokenScopes
from accounts.models import ApiToken
from accounts.serializers import TokenCreatedSerializer, TokenInputSerializer, TokenSerializer
from accounts.services import TokenError, api_token_create, api_token_revoke
from accounts.throttling import ReadThrottle, SubmitThrottle
from kbsite.api_errors import BAD_REQUEST, ERRORS, NOT_FOUND, api_exception_handler, error_body
from kbsite.parsers import JSONParser


class ApiMixin:
    """Token or session authentication, scopes, per-user throttles, one error shape."""

    authentication_classes = [ApiTokenAuthentication, SessionAuthentication]
    permission_classes = [TokenScopes]
    throttle_classes = [ReadThrottle, SubmitThrottle]

    def get_exception_handler(self):
        return api_exception_handler


def token_data(token: ApiToken) -> dict:
    return {
        "id": token.pk,
        "name": token.name,
        "prefix": token.prefix,
        "scopes": list(token.scopes),
        "created_at": token.created_at,
        "last_used_at": token.last_used_at,
    }


class TokenListCreateApi(ApiMixin, APIView):
    """A user's API tokens. Besides a token or the browser's session, HTTP Basic (username
    and password) is taken here, and only here, so an agent given an account can make its own
    token; failed passwords count towards the login lockout (django-axes) like the login page."""

    authentication_classes = [
        ApiTokenAuthentication,
        PasswordAuthentication,
        SessionAuthentication,
    ]
    permission_classes = [IsAuthenticated, TokenScopes]
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="tokens_list",
        responses={200: TokenSerializer(many=True), **ERRORS},
        description="Your API tokens that are not revoked, newest first (never their keys).",
    )
    def get(self, request) -> Response:
        tokens = ApiToken.objects.filter(user=request.user, revoked_at__isnull=True)
        return Response(TokenSerializer([token_data(t) for t in tokens], many=True).data)

    @extend_schema(
        operation_id="tokens_create",
        request=TokenInputSerializer,
        responses={201: TokenCreatedSerializer, **BAD_REQUEST, **ERRORS},
        description="Make an API token for yourself; its key is in this answer only. "
        "Authenticate with your session, with HTTP Basic (username and password), or with "
        "a token that has the submit scope (the new token gets no scope the old one lacks).",
    )
    def post(self, request) -> Response:
        serializer = TokenInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        scopes = serializer.validated_data.get("scopes") or list(ApiToken.Scope.values)
        if isinstance(request.auth, ApiToken):
            missing = sorted(set(scopes) - set(request.auth.scopes))
            if missing:
                raise exceptions.PermissionDenied(
                    f"This token lacks the scope {', '.join(missing)}, so it cannot give it "
                    "to a new token."
                )
        try:
            token, key = api_token_create(
                user=request.user, name=serializer.validated_data.get("name", ""), scopes=scopes
            )
        except TokenError as error:
            body = error_body(error.message, error.code, allowed=error.allowed)
            return Response(body, status=400)
        return Response(TokenCreatedSerializer({**token_data(token), "key": key}).data,
                        status=201)


class TokenDetailApi(ApiMixin, APIView):
    """One of the user's API tokens: DELETE revokes it (its key stops working at once)."""

    authentication_classes = TokenListCreateApi.authentication_classes
    permission_classes = [IsAuthenticated, TokenScopes]

    @extend_schema(
        operation_id="tokens_revoke",
        responses={
            204: OpenApiResponse(description="Revoked (or it already was): its key is refused "
                                 "from now on."),
            **NOT_FOUND,
            **ERRORS,
        },
        description="Revoke one of your API tokens, by the id that GET /api/v1/tokens/ lists; "
        "a token may revoke itself. Another user's token is not found (404). Authenticate "
        "with your session, HTTP Basic, or a token that has the submit scope.",
    )
    def delete(self, request, pk: int) -> Response:
        try:
            api_token_revoke(user=request.user, token_id=pk)
        except ApiToken.DoesNotExist:
            raise exceptions.NotFound("You have no API token with this id.") from None
        return Response(status=204)
