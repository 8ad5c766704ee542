"""API tokens: made, revoked, and looked up by key for every authenticated API request."""

from django.utils import timezone

from accounts.models import ApiToken

# last_used_at is written at most this often per token, so a busy agent's every request does
# not turn into a database write.
TOKEN_TOUCH_SECONDS = 60


class TokenError(Exception):
    """A token that cannot be made; `code` and `allowed` as in the API's error shape."""

    def __init__(self, message: str, *, code: str, allowed: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.allowed = allowed


def api_token_create(*, user, name: str = "", scopes: list[str]) -> tuple[ApiToken, str]:
    """A new token for `user`; the key is returned once and only its hash is stored.

    TokenError (invalid_scopes) when no scope, or an unknown one, is asked for.
    """
    allowed = list(ApiToken.Scope.values)
    unknown = [scope for scope in scopes if scope not in allowed]
    if unknown or not scopes:
        raise TokenError(
            f"Choose at least one scope from {', '.join(allowed)}.",
            code="invalid_scopes",
            allowed=allowed,
        )
    ordered = [scope for scope in allowed if scope in scopes]
    return ApiToken.issue(user=user, name=name.strip()[:100], scopes=ordered)


def api_token_revoke(*, user, token_id: int) -> ApiToken:
    """Revoke one of `user`'s tokens; revoking twice keeps the first time."""
    token = ApiToken.objects.get(pk=token_id, user=user)
    if token.revoked_at is None:
        token.revoke()
    return token


def api_token_authenticate(*, key: str) -> ApiToken | None:
    """The live token with this key (and its user), or None; records when it was last used."""
    token = (
        ApiToken.objects.select_related("user")
        .filter(key_hash=ApiToken.hash_key(key), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    stale = token.last_used_at is None or (
        (now - token.last_used_at).total_seconds() > TOKEN_TOUCH_SECONDS
    )
    if stale:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
