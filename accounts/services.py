"""Account workflows: sign-up (throttled per address), email verification and whether an
account may submit, and API tokens (made, revoked, and looked up by key for every
authenticated API request)."""

import logging
import smtplib
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.core import signing
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from accounts.models import ApiToken, EmailVerification
from accounts.throttling import signup_throttle_take

log = logging.getLogger(__name__)

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


# ---- sign-up and email verification --------------------------------------------------------------

# Signing salt of the verification links: a token signed for another purpose never verifies.
VERIFICATION_SALT = "accounts.email-verification"
# A new link at most this often per account, so the resend button cannot flood a mailbox.
RESEND_SECONDS = 60


class VerificationError(Exception):
    """A verification link that is refused, or one that cannot be sent now."""

    def __init__(self, message: str, *, code: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code  # expired, invalid, not_needed, verified, too_soon, not_sent
        self.retry_after = retry_after


def email_verification_required() -> bool:
    return settings.ACCOUNT_EMAIL_VERIFICATION == "required"


def signup_create(
    *, username: str, password: str, address: str, email: str = "", site_url: str = ""
) -> AbstractBaseUser:
    """Make an account for a client at `address`, counted by the sign-up throttle
    (SignupThrottled, with nothing made, once the address has used its sign-ups).

    The username and password are the caller's to validate (the sign-up form does). With
    email verification required, `email` is needed and a link is sent to it after the commit,
    built on `site_url` (scheme and host); a link that cannot be sent is logged, and the
    profile page offers another.
    """
    verify = email_verification_required()
    if verify and not email:
        raise ValueError("Email verification is required, so sign-up needs an email address.")
    User = get_user_model()
    user = User(username=User.normalize_username(username),
                email=User.objects.normalize_email(email))
    # Hashed before the transaction: PBKDF2 takes a good part of a second, and on SQLite the
    # transaction holds the database's one write lock (runners included) while it lasts.
    user.set_password(password)
    with transaction.atomic():
        signup_throttle_take(address=address)
        user.save()
        if verify:
            EmailVerification.objects.create(user=user, email=user.email)
    if verify:
        try:
            email_verification_send(user=user, site_url=site_url)
        except VerificationError as error:
            log.warning("No verification link for %s: %s", user.username, error.message)
    return user


def _is_verified(verification: EmailVerification, user) -> bool:
    return verification.verified_at is not None and (
        verification.email.lower() == (user.email or "").lower()
    )


@dataclass(frozen=True)
class EmailState:
    """What the profile page says of an account's email check."""

    email: str
    verified_at: datetime | None  # None while the account's present address is unverified
    sent_at: datetime | None
    blocks_submitting: bool  # unverified while the site requires verification


def email_verification_state(*, user) -> EmailState | None:
    """The account's email check, or None for an account that has none to pass."""
    verification = EmailVerification.objects.filter(user=user).first()
    if verification is None:
        return None
    verified = _is_verified(verification, user)
    return EmailState(
        email=user.email,
        verified_at=verification.verified_at if verified else None,
        sent_at=verification.sent_at,
        blocks_submitting=not verified and email_verification_required() and not user.is_staff,
    )


def may_submit(*, user) -> tuple[bool, str]:
    """Whether `user` may submit work now, and if not, why (a sentence to show them).

    Staff always may (as they have no quotas). An account made while the site required email
    verification (ACCOUNT_EMAIL_VERIFICATION) may once its present address is verified; an
    account made by an operator, or before the setting was on, has no check to pass.
    """
    if user is None or not user.is_authenticated:
        return False, "Log in to submit."
    if not user.is_active:
        return False, "This account is disabled."
    if user.is_staff or not email_verification_required():
        return True, ""
    state = email_verification_state(user=user)
    if state is not None and state.blocks_submitting:
        return False, (
            f"Verify your email address ({state.email}) before you submit: follow the link "
            "sent to it, or ask for a new one on your profile page."
        )
    return True, ""


def email_verification_send(*, user, site_url: str) -> EmailVerification:
    """Send `user` a link that verifies their present email address, built on `site_url`.

    VerificationError when the account has no check to pass or has passed it (not_needed,
    verified), when a link went out less than RESEND_SECONDS ago (too_soon), or when the
    mail server refused it (not_sent).
    """
    verification = EmailVerification.objects.filter(user=user).first()
    if verification is None or not user.email:
        raise VerificationError("This account has no email address to verify.",
                                code="not_needed")
    if _is_verified(verification, user):
        raise VerificationError(f"{user.email} is verified already.", code="verified")
    now = timezone.now()
    earliest = now - timedelta(seconds=RESEND_SECONDS)
    # A conditional update, so two requests at once cannot both send.
    claimed = EmailVerification.objects.filter(
        Q(sent_at__isnull=True) | Q(sent_at__lte=earliest), pk=verification.pk
    ).update(sent_at=now, email=user.email)
    if not claimed:
        verification.refresh_from_db()
        wait = RESEND_SECONDS - (now - verification.sent_at).total_seconds()
        raise VerificationError(
            "A link was sent less than a minute ago; check your mailbox (and its spam folder) "
            "before asking for another.",
            code="too_soon",
            retry_after=max(1, int(wait) + 1),
        )
    token = signing.dumps({"user": user.pk, "email": user.email}, salt=VERIFICATION_SALT)
    link = site_url.rstrip("/") + reverse("email_verify", args=[token])
    hours = settings.ACCOUNT_EMAIL_VERIFICATION_HOURS
    try:
        send_mail(
            subject="Verify your email address for kbsite",
            message=(
                f"Hello {user.username},\n\nTo verify this address and start submitting kernels, "
                f"open this link within {hours} hours:\n\n{link}\n\n"
                "If you did not make an account, ignore this message.\n"
            ),
            from_email=None,  # DEFAULT_FROM_EMAIL
            recipient_list=[user.email],
        )
    except (smtplib.SMTPException, OSError) as error:
        # Not sent: the next request may try again at once.
        EmailVerification.objects.filter(pk=verification.pk, sent_at=now).update(
            sent_at=verification.sent_at
        )
        raise VerificationError(
            "The verification email could not be sent; try again later.", code="not_sent"
        ) from error
    verification.sent_at, verification.email = now, user.email
    return verification


def email_verify(*, token: str) -> AbstractBaseUser:
    """Mark the address a verification link was sent to as verified; returns its user.

    VerificationError when the link has expired (expired) or was not made by this site, or
    names an address the account no longer has (invalid). Following a link twice is fine.
    """
    max_age = timedelta(hours=settings.ACCOUNT_EMAIL_VERIFICATION_HOURS)
    try:
        payload = signing.loads(token, salt=VERIFICATION_SALT, max_age=max_age)
    except signing.SignatureExpired:
        raise VerificationError(
            "This link has expired. Log in and ask for a new one on your profile page.",
            code="expired",
        ) from None
    except signing.BadSignature:
        raise VerificationError("This link is not valid; copy the whole link from the email.",
                                code="invalid") from None
    user_id = payload.get("user") if isinstance(payload, dict) else None
    email = payload.get("email") if isinstance(payload, dict) else None
    verification = (
        EmailVerification.objects.select_related("user").filter(user_id=user_id).first()
        if isinstance(user_id, int) and isinstance(email, str)
        else None
    )
    if verification is None or verification.user.email.lower() != email.lower():
        raise VerificationError(
            "This link is for an address the account no longer has; ask for a new link on "
            "your profile page.",
            code="invalid",
        )
    user = verification.user
    if not _is_verified(verification, user):
        EmailVerification.objects.filter(pk=verification.pk).update(
            verified_at=timezone.now(), email=user.email
        )
    return user
