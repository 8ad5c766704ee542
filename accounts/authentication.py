"""API authentication: `Authorization: Token KEY` or `Authorization: Bearer KEY` against hashed
ApiToken rows, and scopes."""

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import (
    BaseAuthentication,
    BasicAuthentication,
    get_authorization_header,
)
from rest_framework.permissions import SAFE_METHODS, BasePermission

from accounts.models import ApiToken
from accounts.services import api_token_authenticate

KEYWORD = "Token"
# Both name the same keys: `Token` is DRF's habit, `Bearer` (RFC 6750) what most HTTP clients
# and agent frameworks send.
KEYWORDS = (b"token", b"bearer")


def token_from_header(header: bytes):
    """(user, token) for a valid `Token KEY` or `Bearer KEY` header, None when there is no
    such header (another scheme, e.g. Basic, is left to the other authentications).

    Shared by the DRF views and the async event stream, which DRF does not serve.
    """
    parts = header.split()
    if not parts or parts[0].lower() not in KEYWORDS:
        return None
    if len(parts) != 2:
        raise exceptions.AuthenticationFailed(
            "Malformed Authorization header; send `Authorization: Bearer KEY` "
            "(or `Token KEY`)."
        )
    try:
        key = parts[1].decode("ascii")
    except UnicodeDecodeError:
        raise exceptions.AuthenticationFailed("The token is not ASCII.") from None
    token = api_token_authenticate(key=key)
    if token is None:
        raise exceptions.AuthenticationFailed("The token is unknown or was revoked.")
    return token.user, token


class ApiTokenAuthentication(BaseAuthentication):
    def authenticate(self, request):
        return token_from_header(get_authorization_header(request))

    def authenticate_header(self, request) -> str:
        # Having a challenge makes DRF answer 401 (not 403) to requests without credentials.
        return f'{KEYWORD} realm="api"'


class PasswordAuthentication(BasicAuthentication):
    """HTTP Basic, for the one endpoint that makes tokens. The password goes through
    django-axes like the login page's: after AXES_FAILURE_LIMIT failures that username is
    locked out (429, with Retry-After), even with the right password."""

    def authenticate(self, request):
        try:
            return super().authenticate(request)
        except exceptions.AuthenticationFailed:
            if getattr(request, "axes_locked_out", False):  # set by axes' backend
                seconds = int(settings.AXES_COOLOFF_TIME.total_seconds())
                raise exceptions.Throttled(
                    wait=seconds,
                    detail=f"Too many failed logins for this username; try again in "
                    f"{seconds // 60} minutes.",
                ) from None
            raise

    def authenticate_header(self, request) -> str:
        return f'{KEYWORD} realm="api"'  # a browser is not to pop up a password dialog


class PasswordScheme(OpenApiAuthenticationExtension):
    target_class = PasswordAuthentication
    name = "basicAuth"

    def get_security_definition(self, auto_schema) -> dict:
        return {
            "type": "http",
            "scheme": "basic",
            "description": "Your username and password; taken by POST /api/v1/tokens/ only.",
        }


class TokenScopes(BasePermission):
    """A token may read with the `read` scope and submit with the `submit` scope.

    Browser sessions (the user's own login) are not limited by scopes.
    """

    def has_permission(self, request, view) -> bool:
        token = request.auth
        if not isinstance(token, ApiToken):
            return True
        needed = ApiToken.Scope.READ if request.method in SAFE_METHODS else ApiToken.Scope.SUBMIT
        if needed in token.scopes:
            return True
        self.message = f"This token lacks the {needed.value!r} scope."
        return False


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = ApiTokenAuthentication
    name = ["bearerAuth", "tokenAuth"]

    def get_security_requirement(self, auto_schema) -> list[dict]:
        return [{name: []} for name in self.name]  # either one (OR), not both

    def get_security_definition(self, auto_schema) -> list[dict]:
        where = (
            "a key made on your profile page, by POST /api/v1/tokens/, or by "
            "`manage.py create_token`"
        )
        return [
            {"type": "http", "scheme": "bearer", "description": f"`Bearer KEY`, with {where}."},
            {
                "type": "apiKey",
                "in": "header",
                "name": "Authorization",
                "description": f"`Token KEY` (the same keys), with {where}.",
            },
        ]
