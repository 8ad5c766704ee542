"""Response headers that every page gets, and a clear answer when the database is unavailable.

SecurityHeadersMiddleware: a Content-Security-Policy that allows scripts, styles, fonts and
images from this site only (no inline script or style, no eval, no plugins, no framing), plus
Permissions-Policy and the headers Django's SecurityMiddleware sets, in case its settings were
turned off. Pages keep their JavaScript in static files; the Swagger page is served so that the
same policy holds for it (submissions.views.api_docs).

DatabaseUnavailableMiddleware: a view that meets a locked or unreachable database ("database is
locked", a restarting PostgreSQL) answers 503 with Retry-After instead of a bare 500, so that
clients retry; the transaction it was in is rolled back, so nothing half-made is left.
"""

import logging

from django.core.exceptions import DisallowedHost
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin

log = logging.getLogger(__name__)

CONTENT_SECURITY_POLICY = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],  # Swagger UI's icons are data: URLs
    "font-src": ["'self'"],
    "connect-src": ["'self'"],  # plus this host's ws:// and wss:// (live updates), below
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=(), usb=()"
DATABASE_RETRY_AFTER = 5


def content_security_policy(request) -> str:
    directives = {name: list(sources) for name, sources in CONTENT_SECURITY_POLICY.items()}
    try:
        host = request.get_host()  # validated against ALLOWED_HOSTS, so safe to repeat here
    except DisallowedHost:
        host = ""
    if host:
        # CSP 3 lets 'self' cover same-host websockets; older browsers need them spelled out.
        directives["connect-src"] += [f"ws://{host}", f"wss://{host}"]
    return "; ".join(f"{name} {' '.join(sources)}" for name, sources in directives.items())


class SecurityHeadersMiddleware(MiddlewareMixin):
    def process_response(self, request, response):
        if "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = content_security_policy(request)
        response.headers.setdefault("Permissions-Policy", PERMISSIONS_POLICY)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response


class DatabaseUnavailableMiddleware(MiddlewareMixin):
    def process_exception(self, request, exception):
        if not isinstance(exception, (OperationalError, InterfaceError)):
            return None
        log.warning("database unavailable during %s %s: %s", request.method, request.path,
                    exception)
        message = "The database is busy or unreachable; nothing was changed. Retry shortly."
        if request.path.startswith("/api/"):
            response = JsonResponse(
                {
                    "detail": message,
                    "code": "database_unavailable",
                    "retry_after": DATABASE_RETRY_AFTER,
                },
                status=503,
            )
        else:
            response = HttpResponse(
                "<!doctype html><html lang=en><meta charset=utf-8><title>Busy · kbsite</title>"
                f"<h1>The site is busy</h1><p>{message}</p></html>",
                status=503,
            )
        response["Retry-After"] = str(DATABASE_RETRY_AFTER)
        return response
