"""Response headers: a content security policy with no inline script on every page (Swagger's
included), the usual hardening headers, and templates that keep their script in static files."""

import re
from pathlib import Path

import pytest
from django.conf import settings as site_settings
from django.contrib.staticfiles.handlers import StaticFilesHandler
from django.test import Client
from django.test.testcases import LiveServerThread

from kbsite.middleware import content_security_policy
from submissions.services import submission_create
from tests.conftest import REPO, kernel_source

pytestmark = pytest.mark.django_db

HEADERS_MIDDLEWARE = "kbsite.middleware.SecurityHeadersMiddleware"
DATABASE_MIDDLEWARE = "kbsite.middleware.DatabaseUnavailableMiddleware"


@pytest.fixture
def with_middleware(settings):
    """The site's middleware, with ours added where the settings do not list it yet."""
    middleware = list(settings.MIDDLEWARE)
    if HEADERS_MIDDLEWARE not in middleware:
        middleware.insert(1, HEADERS_MIDDLEWARE)
    if DATABASE_MIDDLEWARE not in middleware:
        middleware.append(DATABASE_MIDDLEWARE)
    settings.MIDDLEWARE = middleware
    return settings


def policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in header.split("; ")}


def test_the_site_settings_install_both_middleware():
    assert HEADERS_MIDDLEWARE in site_settings.MIDDLEWARE
    assert DATABASE_MIDDLEWARE in site_settings.MIDDLEWARE


@pytest.mark.parametrize(
    "path", ["/", "/problems/", "/leaderboard/", "/accounts/login/", "/api/v1/problems/",
             "/api/docs/", "/api/schema/", "/admin/login/", "/no/such/page/"],
)
def test_every_answer_carries_a_policy_without_inline_script(with_middleware, path):
    response = Client().get(path)
    csp = policy(response)
    assert csp["script-src"] == ["'self'"]
    assert csp["style-src"] == ["'self'"]
    assert csp["object-src"] == ["'none'"] and csp["frame-ancestors"] == ["'none'"]
    assert csp["base-uri"] == ["'self'"] and csp["form-action"] == ["'self'"]
    assert "ws://testserver" in csp["connect-src"] and "wss://testserver" in csp["connect-src"]
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"
    assert "camera=()" in response["Permissions-Policy"]


def test_an_unknown_host_gets_no_websocket_sources_in_its_policy(rf):
    request = rf.get("/", HTTP_HOST="evil.example; script-src *")
    header = content_security_policy(request)
    assert "evil" not in header and "script-src 'self';" in header


def template_files() -> list[Path]:
    roots = [REPO / "templates", *REPO.glob("*/templates")]
    return sorted(p for root in roots for p in root.rglob("*.html"))


INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
EVENT_HANDLER = re.compile(r"<[^>]*\son[a-z]+\s*=", re.IGNORECASE)
JAVASCRIPT_URL = re.compile(r"(?:href|src|action)\s*=\s*[\"']?\s*javascript:", re.IGNORECASE)
INLINE_STYLE = re.compile(r"<style\b[^>]*>|<[^>]*\sstyle\s*=", re.IGNORECASE)


def test_no_template_has_inline_script_styles_event_handlers_or_javascript_urls():
    """The policy blocks them all: script and style belong in static files (a JSON <script>
    type is data, not script)."""
    offenders = []
    for path in template_files():
        text = path.read_text()
        for pattern in (INLINE_SCRIPT, EVENT_HANDLER, JAVASCRIPT_URL, INLINE_STYLE):
            for match in pattern.finditer(text):
                if "application/json" in match.group(0):
                    continue
                line = text.count("\n", 0, match.start()) + 1
                offenders.append(f"{path.relative_to(REPO)}:{line}: {match.group(0)[:60]}")
    assert len(template_files()) > 20
    assert offenders == []


# ---- in a browser --------------------------------------------------------------------------------


@pytest.fixture
def site_with_policy(with_middleware, transactional_db):
    """The site in a thread of this process, so that it runs with the middleware added above."""
    server = LiveServerThread("127.0.0.1", StaticFilesHandler, port=0)
    server.daemon = True
    server.start()
    server.is_ready.wait()
    if server.error:
        raise server.error
    yield f"http://127.0.0.1:{server.port}"
    server.terminate()


WATCH_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(event.violatedDirective + " " + event.blockedURI);
});
"""


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_pages_and_the_swagger_docs_run_under_the_policy_without_a_violation(
    browser, site_with_policy, user, cpu_hardware, relu_problem
):
    """Slow: only a real browser enforces the content security policy and reports its violations."""
    submission = submission_create(
        user=user, problem=relu_problem, source=kernel_source("relu_correct.py"),
        backend="torch", hardware=cpu_hardware,
    )
    page = browser.new_page()
    page.add_init_script(WATCH_VIOLATIONS)
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)

    page.goto(f"{site_with_policy}/accounts/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", "a-long-passphrase-1")
    page.click("main form button[type=submit], main form input[type=submit]")
    page.wait_for_load_state()

    visited = {}
    for path in ["/", "/problems/", f"/problems/{relu_problem.level}/{relu_problem.number}/",
                 "/leaderboard/", "/leaderboard/1/901/cpu/", "/hardware/", "/runs/",
                 "/submissions/", "/submissions/new/", "/accounts/profile/",
                 "/admin/login/", f"/submissions/{submission.pk}/"]:
        page.goto(site_with_policy + path)
        page.wait_for_load_state("load")
        visited[path] = page.evaluate("window.__violations")
    # The live page's script runs: it polls (the thread server has no websockets) and fills
    # in the queue position.
    page.wait_for_function(
        "document.getElementById('queue-position').textContent.includes('position 1')",
        timeout=30_000,
    )
    visited["live"] = page.evaluate("window.__violations")

    page.goto(f"{site_with_policy}/api/docs/")
    page.wait_for_selector(".swagger-ui .opblock", timeout=60_000)
    visited["/api/docs/"] = page.evaluate("window.__violations")
    assert page.locator(".opblock").count() >= 10  # Swagger UI rendered every operation

    assert {path: found for path, found in visited.items() if found} == {}
    assert [e for e in console_errors if "Content Security Policy" in e] == []
