"""API tokens: how agents, scripts and `kb` authenticate (users are django.contrib.auth's)."""

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """An API token; only its SHA-256 is stored, the key is shown once at creation."""

    class Scope(models.TextChoices):
        READ = "read"
        SUBMIT = "submit"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=12, db_index=True)  # shown in lists to tell tokens apart
    key_hash = models.CharField(max_length=64, unique=True)
    scopes = models.JSONField(default=list)  # ["read", "submit"]
    is_runner = models.BooleanField(default=False)  # runners authenticate as such
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # The table it had in the submissions app, where it lived first: moving the model
        # moved no row (accounts/migrations/0001_initial.py).
        db_table = "submissions_apitoken"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @staticmethod
    def hash_key(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def issue(
        cls, *, user, name: str = "", scopes: list[str] | None = None
    ) -> tuple["ApiToken", str]:
        key = "kb_" + secrets.token_urlsafe(32)
        token = cls.objects.create(
            user=user,
            name=name,
            prefix=key[:10],
            key_hash=cls.hash_key(key),
            scopes=scopes if scopes is not None else [cls.Scope.READ, cls.Scope.SUBMIT],
        )
        return token, key

    def revoke(self) -> None:
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])


class SignupAddress(models.Model):
    """The recent sign-ups from one client address (accounts/throttling.py).

    The row is also what concurrent sign-ups from that address lock, so they are counted one
    after another: a burst of sign-ups from a new address cannot all see a count of zero.
    """

    address = models.CharField(max_length=64, unique=True)  # an IPv4 address or an IPv6 /64
    # Epoch seconds of the sign-ups still inside the window: at most the limit of them, since
    # older ones are dropped whenever the row is written.
    recent = models.JSONField(default=list)

    def __str__(self) -> str:
        return self.address


class EmailVerification(models.Model):
    """The email check of an account made while ACCOUNT_EMAIL_VERIFICATION was "required".

    Accounts without a row (made by an operator, or before the setting was turned on) need no
    check. The account's check holds while `email` is still the account's address, so an
    address changed afterwards needs a link of its own.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="email_verification",
    )
    email = models.EmailField(max_length=254)  # where the last link went
    sent_at = models.DateTimeField(null=True, blank=True)
    verified_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        state = "verified" if self.verified_at else "pending"
        return f"{self.email} ({state})"
