"""Per-user API throttles. Rates come from settings.API_THROTTLE_RATES when it is set.

Counts live in Django's cache: per process with the default local-memory cache, shared between
web processes once CACHES points at Redis (the scaled setup).
"""

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

DEFAULT_RATES = {"api_read": "1200/min", "api_submit": "120/min"}


class _UserThrottle(SimpleRateThrottle):
    def get_rate(self) -> str | None:
        # Read at request time so that settings overrides (tests, operators) take effect.
        rates = {**DEFAULT_RATES, **getattr(settings, "API_THROTTLE_RATES", {})}
        return rates.get(self.scope)

    def get_cache_key(self, request, view) -> str:
        if request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            ident = f"ip-{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def wait(self) -> float | None:
        wait = super().wait()
        # Retry-After is whole seconds; never tell a client to come back at once.
        return max(1.0, wait) if wait is not None else None


class ReadThrottle(_UserThrottle):
    scope = "api_read"

    def allow_request(self, request, view) -> bool:
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            return True
        return super().allow_request(request, view)


class SubmitThrottle(_UserThrottle):
    scope = "api_submit"

    def allow_request(self, request, view) -> bool:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        return super().allow_request(request, view)
