"""Account workflows: sign-up (throttled per address), and API tokens (made, revoked, and
looked up by key for every authenticated API request)."""

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken
from accounts.throttling import signup_throttle_take

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


# ---- sign-up ------------------------------------------------------------------------------------


def signup_create(*, username: str, password: str, address: str) -> AbstractBaseUser:
    """Make an account for a client at `address`, counted by the sign-up throttle
    (SignupThrottled, with nothing made, once the address has used its sign-ups).

    The username and password are the caller's to validate (the sign-up form does).
    """
    User = get_user_model()
    user = User(username=User.normalize_username(username))
    # Hashed before the transaction: PBKDF2 takes a good part of a second, and on SQLite the
    # transaction holds the database's one write lock (runners included) while it lasts.
    user.set_password(password)
    with transaction.atomic():
        signup_throttle_take(address=address)
        user.save()
    return user
