"""API authentication: `Authorization: Token KEY` against hashed ApiToken rows, and scopes."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import SAFE_METHODS, BasePermission

from submissions.models import ApiToken
from submissions.services import api_token_authenticate

KEYWORD = "Token"


def token_from_header(header: bytes):
    """(user, token) for a valid `Token KEY` header, None when there is no such header.

    Shared by the DRF views and the async event stream, which DRF does not serve.
    """
    parts = header.split()
    if not parts or parts[0].lower() != KEYWORD.lower().encode():
        return None
    if len(parts) != 2:
        raise exceptions.AuthenticationFailed(
            "Malformed Authorization header; send `Authorization: Token KEY`."
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
    name = "tokenAuth"

    def get_security_definition(self, auto_schema) -> dict:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token KEY`, with a key made on your profile page or by "
            "`manage.py create_token`.",
        }
