"""Throttles: the API's per user, and sign-up's per client address.

The API's rates come from settings.API_THROTTLE_RATES when it is set. Their counts live in
Django's cache: per process with the default local-memory cache, shared between web processes
once CACHES points at Redis (the scaled setup).

Sign-up's count lives in the database (SignupAddress) instead: a per-process count would let
each web process take its own share, and sign-ups are rare enough for a row write each.
"""

import ipaddress
import math
import time

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

from accounts.models import SignupAddress

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

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


# ---- sign-up, per client address -----------------------------------------------------------------

SIGNUP_WINDOW_SECONDS = 3600  # SIGNUP_THROTTLE_PER_HOUR counts the sign-ups of the last hour


def _parse(value: str) -> Address | None:
    try:
        return ipaddress.ip_address(value.strip())
    except ValueError:
        return None


def _is_trusted(
    address: Address, proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network]
) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in network for network in proxies)


def client_address(request) -> str:
    """The address a request came from: REMOTE_ADDR, or behind a trusted proxy the right-most
    address of X-Forwarded-For that is not a trusted proxy.

    Only the right end of X-Forwarded-For is believed: each trusted proxy appends the address
    it was reached from, and everything to the left of that came from the client, who may write
    anything there. Without TRUSTED_PROXIES the header is never read.
    """
    remote = request.META.get("REMOTE_ADDR", "")
    proxies = [ipaddress.ip_network(entry, strict=False) for entry in settings.TRUSTED_PROXIES]
    peer = _parse(remote)
    if peer is None or not _is_trusted(peer, proxies):
        return remote
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    for hop in reversed([hop for hop in forwarded.split(",") if hop.strip()]):
        address = _parse(hop)
        if address is None:
            # Not an address, so not what a trusted proxy wrote: stop at the last hop that is
            # known, which throttles that proxy's clients together rather than trusting junk.
            break
        peer = address
        if not _is_trusted(address, proxies):
            break
    return str(peer)


def throttle_key(address: str) -> str:
    """What sign-ups are counted by: the address itself, or for IPv6 its /64 network, since
    one host is commonly given a whole /64 and could otherwise take a fresh address each time.
    """
    parsed = _parse(address)
    if parsed is None:
        return address.strip()[:64] or "unknown"
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(parsed)


class SignupThrottled(Exception):
    """Too many sign-ups from one address; `retry_after` is in whole seconds."""

    def __init__(self, *, limit: int, retry_after: int) -> None:
        minutes = max(1, math.ceil(retry_after / 60))
        self.message = (
            f"Too many accounts were made from your address: at most {limit} an hour. "
            f"Try again in {minutes} minute{'s' if minutes != 1 else ''}."
        )
        super().__init__(self.message)
        self.limit = limit
        self.retry_after = retry_after


def _within_window(times: list[float], now: float) -> list[float]:
    return sorted(t for t in times if now - t < SIGNUP_WINDOW_SECONDS)


def _check(times: list[float], *, limit: int, now: float) -> None:
    if len(times) < limit:
        return
    # The count drops below the limit once all but limit - 1 of these have left the window.
    frees_at = times[len(times) - limit] + SIGNUP_WINDOW_SECONDS
    raise SignupThrottled(limit=limit, retry_after=max(1, math.ceil(frees_at - now)))


def signup_throttle_check(*, address: str, now: float | None = None) -> None:
    """Raise SignupThrottled when `address` has used up its sign-ups for now.

    Reads only, so that a throttled client is turned away before any work on its form; the
    count that holds is signup_throttle_take's.
    """
    limit = settings.SIGNUP_THROTTLE_PER_HOUR
    if not limit:
        return
    now = time.time() if now is None else now
    row = SignupAddress.objects.filter(address=throttle_key(address)).first()
    if row is not None:
        _check(_within_window(row.recent, now), limit=limit, now=now)


def signup_throttle_take(*, address: str, now: float | None = None) -> None:
    """Count one sign-up from `address`, or raise SignupThrottled.

    Call it inside the transaction that makes the account: an account that then fails is not
    counted, and a refused sign-up leaves nothing. The address's row is locked first (on
    SQLite the transaction's write lock does it), so concurrent sign-ups from one address are
    counted one after another.
    """
    limit = settings.SIGNUP_THROTTLE_PER_HOUR
    if not limit:
        return
    now = time.time() if now is None else now
    key = throttle_key(address)
    SignupAddress.objects.get_or_create(address=key)
    row = SignupAddress.objects.select_for_update().get(address=key)
    recent = _within_window(row.recent, now)
    _check(recent, limit=limit, now=now)
    row.recent = [*recent, now]
    row.save(update_fields=["recent"])
