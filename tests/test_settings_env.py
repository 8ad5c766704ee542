"""Settings switch by environment alone, and are production-safe when DEBUG is off.

Each case imports the settings in a fresh `python -c` process with a chosen environment, as a
web worker or a runner on another host would, and reads back what Django ended up with.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Every variable the settings read to choose a setup; removed from the inherited environment so
# that the machine running the tests (make test-scaled exports some of them) cannot leak in.
SWITCHES = (
    "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "BEHIND_TLS_PROXY",
    "SECURE_HSTS_SECONDS", "DATABASE_URL", "REDIS_URL", "SQLITE_PATH", "SQLITE_TEST_PATH",
    "DJANGO_SETTINGS_MODULE", "DB_POOL", "DB_POOL_MIN_SIZE", "DB_POOL_MAX_SIZE", "DB_POOL_TIMEOUT",
    "DB_CONN_MAX_AGE", "SECURE_COOKIES", "KBSITE_VAR_DIR",
)
PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": "a-long-random-production-secret-that-only-the-web-tier-holds-0123456789",
    "ALLOWED_HOSTS": "kb.example.org,www.kb.example.org",
    "CSRF_TRUSTED_ORIGINS": "https://kb.example.org",
}

# Reading a setting loads the settings module alone (no app imports), which is all a setup
# switch needs and keeps each case to a fraction of a second.
SHOW_SETTINGS = """
import json
from django.conf import settings
names = {names!r}
print(json.dumps({{name: getattr(settings, name, None) for name in names}}, default=str))
"""

LOAD_SETTINGS = "from django.conf import settings; settings.DEBUG"


def clean_env(tmp_path: Path, **env: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    # var/ (SQLite file, collected static files) goes to a folder of this test only.
    return {**base, "KBSITE_VAR_DIR": str(tmp_path / "var"), **env}


def python(tmp_path: Path, code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**clean_env(tmp_path, **env), "DJANGO_SETTINGS_MODULE": "kbsite.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def settings_with(tmp_path: Path, *names: str, **env: str) -> dict:
    """The named settings as a process started with exactly this environment sees them."""
    result = python(tmp_path, SHOW_SETTINGS.format(names=names), **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_without_urls_it_runs_embedded_on_sqlite_the_orm_broker_and_an_in_memory_layer(tmp_path):
    s = settings_with(tmp_path, "DATABASES", "Q_CLUSTER", "CHANNEL_LAYERS")
    assert s["DATABASES"]["default"]["ENGINE"] == "django.db.backends.sqlite3"
    assert s["DATABASES"]["default"]["NAME"] == str(tmp_path / "var" / "db.sqlite3")
    assert s["Q_CLUSTER"]["orm"] == "default" and "redis" not in s["Q_CLUSTER"]
    assert s["CHANNEL_LAYERS"]["default"]["BACKEND"] == "channels.layers.InMemoryChannelLayer"


def test_debug_is_off_unless_asked_for(tmp_path):
    s = settings_with(tmp_path, "DEBUG", "ALLOWED_HOSTS", "SESSION_COOKIE_SECURE", "STORAGES")
    assert s["DEBUG"] is False
    assert s["ALLOWED_HOSTS"] == [] and s["SESSION_COOKIE_SECURE"] is True
    assert "Manifest" in s["STORAGES"]["staticfiles"]["BACKEND"]


def test_with_debug_1_it_has_the_development_defaults(tmp_path):
    s = settings_with(
        tmp_path, "DEBUG", "ALLOWED_HOSTS", "SESSION_COOKIE_SECURE", "STORAGES", "SECRET_KEY",
        DEBUG="1",
    )
    assert s["DEBUG"] is True
    assert set(s["ALLOWED_HOSTS"]) == {"127.0.0.1", "localhost", "testserver"}
    assert s["SESSION_COOKIE_SECURE"] is False
    assert s["STORAGES"]["staticfiles"]["BACKEND"].endswith("StaticFilesStorage")
    assert "Manifest" not in s["STORAGES"]["staticfiles"]["BACKEND"]
    assert s["SECRET_KEY"] == "insecure-development-key-only-for-debug"


def test_it_uses_the_key_kept_in_var_and_the_environments_key_wins(tmp_path):
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "secret-key").write_text("kept-by-make-run-0123456789abcdefghijklmnop\n")
    assert settings_with(tmp_path, "SECRET_KEY")["SECRET_KEY"] == (
        "kept-by-make-run-0123456789abcdefghijklmnop"
    )
    s = settings_with(tmp_path, "SECRET_KEY", SECRET_KEY="from-the-environment-0123456789")
    assert s["SECRET_KEY"] == "from-the-environment-0123456789"


def test_make_run_serves_plain_http_cookies_when_it_says_so(tmp_path):
    s = settings_with(
        tmp_path, "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "ALLOWED_HOSTS",
        SECURE_COOKIES="0", ALLOWED_HOSTS="127.0.0.1,localhost",
    )
    assert s["SESSION_COOKIE_SECURE"] is False and s["CSRF_COOKIE_SECURE"] is False
    assert s["ALLOWED_HOSTS"] == ["127.0.0.1", "localhost"]


def test_database_url_switches_to_postgresql_with_every_part_of_the_url(tmp_path):
    s = settings_with(
        tmp_path, "DATABASES",
        DATABASE_URL="postgres://kb%40site:p%3Ass%2Fw0rd@db.internal:6543/kernels?sslmode=require",
    )
    db = s["DATABASES"]["default"]
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["NAME"], db["USER"], db["PASSWORD"]) == ("kernels", "kb@site", "p:ss/w0rd")
    assert (db["HOST"], db["PORT"]) == ("db.internal", "6543")
    # The URL's query passes through; connections come from a pool of each process, so no
    # connection is kept past its request (Django refuses CONN_MAX_AGE with a pool), and the
    # pool checks each connection as it hands it out (after a database restart).
    assert db["OPTIONS"] == {
        "sslmode": "require", "pool": {"min_size": 2, "max_size": 10, "timeout": 10.0},
    }
    assert db["CONN_MAX_AGE"] == 0 and db["CONN_HEALTH_CHECKS"] is True


def test_the_pool_sizes_and_wait_come_from_the_environment(tmp_path):
    s = settings_with(
        tmp_path, "DATABASES", DATABASE_URL="postgres://kbsite:pw@db.internal:5432/kbsite",
        DB_POOL_MIN_SIZE="1", DB_POOL_MAX_SIZE="4", DB_POOL_TIMEOUT="2.5",
    )
    db = s["DATABASES"]["default"]
    assert db["OPTIONS"]["pool"] == {"min_size": 1, "max_size": 4, "timeout": 2.5}
    assert db["CONN_MAX_AGE"] == 0


def test_db_pool_0_keeps_per_thread_connections_for_conn_max_age_instead(tmp_path):
    url = "postgres://kbsite:pw@db.internal:5432/kbsite"
    s = settings_with(tmp_path, "DATABASES", DATABASE_URL=url, DB_POOL="0")
    db = s["DATABASES"]["default"]
    assert "pool" not in db["OPTIONS"] and db["CONN_MAX_AGE"] == 60
    s = settings_with(tmp_path, "DATABASES", DATABASE_URL=url, DB_POOL="0", DB_CONN_MAX_AGE="5")
    assert s["DATABASES"]["default"]["CONN_MAX_AGE"] == 5


def test_a_database_url_that_is_not_postgresql_is_refused_with_a_clear_error(tmp_path):
    result = python(tmp_path, LOAD_SETTINGS, DATABASE_URL="mysql://kb:pw@db/kb")
    assert result.returncode != 0
    assert "DATABASE_URL must be a postgres:// URL, not mysql://" in result.stderr


def test_redis_url_switches_the_broker_and_the_channel_layer_to_redis(tmp_path):
    url = "redis://:secret@cache.internal:6380/2"
    s = settings_with(tmp_path, "Q_CLUSTER", "CHANNEL_LAYERS", REDIS_URL=url)
    assert s["Q_CLUSTER"]["redis"] == url and "orm" not in s["Q_CLUSTER"]
    layer = s["CHANNEL_LAYERS"]["default"]
    assert layer["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    # A host is the URL itself or a dict of connection options with the URL as its address.
    (host,) = layer["CONFIG"]["hosts"]
    assert (host["address"] if isinstance(host, dict) else host) == url


def test_a_runner_host_is_configured_by_the_database_and_broker_urls_alone(tmp_path):
    # No ALLOWED_HOSTS, no LLM keys: of the web tier's settings a GPU host shares only the key
    # django-q signs the queued tasks with (the next test).
    s = settings_with(
        tmp_path, "DATABASES", "Q_CLUSTER",
        DATABASE_URL="postgres://kbsite:pw@db.internal:5432/kbsite",
        REDIS_URL="redis://cache.internal:6379/0",
    )
    assert s["DATABASES"]["default"]["HOST"] == "db.internal"
    assert s["Q_CLUSTER"]["redis"] == "redis://cache.internal:6379/0"


def test_with_debug_off_the_web_server_refuses_to_start_without_a_secret_key(tmp_path):
    assert python(tmp_path, LOAD_SETTINGS, DEBUG="0").returncode == 0  # commands, runners
    result = python(tmp_path, "import kbsite.asgi", DEBUG="0")
    assert result.returncode != 0
    assert "SECRET_KEY must be set in the environment when DEBUG is off" in result.stderr


def test_with_debug_off_a_runner_refuses_to_start_without_the_key_its_tasks_are_signed_with(
    tmp_path,
):
    start_runner = (
        "import django; django.setup(); from django.core.management import call_command; "
        "call_command('runner', '--hardware', 'cpu')"
    )
    result = python(tmp_path, start_runner, DEBUG="0")
    assert result.returncode != 0
    assert "SECRET_KEY must be set to the web tier's key" in result.stderr


def test_with_debug_off_the_defaults_are_production_safe(tmp_path):
    s = settings_with(
        tmp_path, "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE", "SECURE_CONTENT_TYPE_NOSNIFF", "STORAGES", "SECURE_HSTS_SECONDS",
        "SECURE_SSL_REDIRECT", DEBUG="0", SECRET_KEY="not-the-development-key-0123456789abcdef",
    )
    assert s["DEBUG"] is False
    assert s["SECRET_KEY"] == "not-the-development-key-0123456789abcdef"
    assert s["ALLOWED_HOSTS"] == []  # nothing is served until the operator names its hosts
    assert s["SESSION_COOKIE_SECURE"] is True and s["CSRF_COOKIE_SECURE"] is True
    assert s["SECURE_CONTENT_TYPE_NOSNIFF"] is True
    assert (
        s["STORAGES"]["staticfiles"]["BACKEND"]
        == "whitenoise.storage.CompressedManifestStaticFilesStorage"
    )
    # HSTS and the https redirect only once a TLS proxy is declared: without one they would
    # lock browsers out of a site that is not yet served over https.
    assert s["SECURE_HSTS_SECONDS"] == 0 and s["SECURE_SSL_REDIRECT"] is False


def test_hosts_and_trusted_origins_come_from_comma_separated_lists(tmp_path):
    s = settings_with(tmp_path, "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", **PRODUCTION)
    assert s["ALLOWED_HOSTS"] == ["kb.example.org", "www.kb.example.org"]
    assert s["CSRF_TRUSTED_ORIGINS"] == ["https://kb.example.org"]


def test_behind_a_tls_proxy_it_trusts_the_forwarded_scheme_and_sends_hsts(tmp_path):
    s = settings_with(
        tmp_path, "SECURE_PROXY_SSL_HEADER", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS", **PRODUCTION, BEHIND_TLS_PROXY="1",
    )
    assert s["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert s["SECURE_SSL_REDIRECT"] is True
    assert s["SECURE_HSTS_SECONDS"] == 31536000
    assert s["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True


def test_the_deploy_check_finds_no_security_issue_in_the_production_settings(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=REPO,
        env=clean_env(tmp_path, **PRODUCTION, BEHIND_TLS_PROXY="1"),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    found = set(re.findall(r"\((security\.[A-Z]\d+)\)", result.stdout + result.stderr))
    # W021 asks for HSTS preload: a commitment browsers keep for months, which stays the
    # operator's choice rather than a default.
    assert found <= {"security.W021"}, result.stdout + result.stderr


SERVE_STATIC = """
import json, django
from django.core.management import call_command
django.setup()
call_command("collectstatic", interactive=False, verbosity=0)
from django.templatetags.static import static
from django.test import Client
url = static("kbsite/site.css")
client = Client()
https = {"HTTP_X_FORWARDED_PROTO": "https", "HTTP_HOST": "kb.example.org"}
asset = client.get(url, HTTP_ACCEPT_ENCODING="gzip", **https)
plain = client.get(url, HTTP_HOST="kb.example.org")
print(json.dumps({
    "url": url,
    "status": asset.status_code,
    "encoding": asset.headers.get("Content-Encoding"),
    "cache": asset.headers.get("Cache-Control"),
    "hsts": asset.headers.get("Strict-Transport-Security"),
    "plain_status": plain.status_code,
    "plain_location": plain.headers.get("Location"),
}))
"""


def test_with_debug_off_whitenoise_serves_hashed_compressed_static_files_over_https(tmp_path):
    result = python(tmp_path, SERVE_STATIC, **PRODUCTION, BEHIND_TLS_PROXY="1")
    assert result.returncode == 0, result.stderr
    served = json.loads(result.stdout.strip().splitlines()[-1])
    # collectstatic wrote a manifest: the page links to a content-hashed name ...
    assert re.fullmatch(r"/static/kbsite/site\.[0-9a-f]{12}\.css", served["url"]), served
    assert (tmp_path / "var" / "staticfiles" / "staticfiles.json").exists()
    # ... which whitenoise serves compressed, cached for good, with HSTS on https,
    assert served["status"] == 200
    assert served["encoding"] in {"gzip", "br"}
    assert "immutable" in served["cache"]
    assert served["hsts"].startswith("max-age=31536000")
    # and a plain http request is sent to https.
    assert served["plain_status"] == 301
    assert served["plain_location"] == f"https://kb.example.org{served['url']}"


# ---- on a real PostgreSQL server (make test-scaled) ---------------------------------------------

needs_postgresql = pytest.mark.skipif(
    not os.environ.get("DATABASE_URL"), reason="needs DATABASE_URL (make test-scaled starts it)"
)

# As daphne serves requests: each in a thread of its own that ends with the request, Django
# closing the thread's connection when the request finishes. Reads only pg_backend_pid().
REQUESTS_IN_THREADS = """
import json, threading, django
django.setup()
from django.db import connection
sessions = []
def request():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        sessions.append(cursor.fetchone()[0])
    connection.close_if_unusable_or_obsolete()  # what request_finished does
for _ in range(20):
    thread = threading.Thread(target=request)
    thread.start()
    thread.join()
print(json.dumps(sessions))
"""


@pytest.mark.scaled
@needs_postgresql
@pytest.mark.parametrize("pool", ["1", "0"])
def test_requests_in_threads_of_their_own_reuse_pooled_postgresql_sessions(tmp_path, pool):
    result = python(tmp_path, REQUESTS_IN_THREADS, DATABASE_URL=os.environ["DATABASE_URL"],
                    DB_POOL=pool, DB_POOL_MAX_SIZE="3")
    assert result.returncode == 0, result.stderr
    sessions = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(sessions) == 20
    if pool == "1":
        # The pool's few connections (at most its max_size), reused request after request.
        assert len(set(sessions)) <= 3
    else:
        # Without the pool a thread's persistent connection dies with its thread: one new
        # PostgreSQL session per request, the cost the pool removes.
        assert len(set(sessions)) == 20


# django-q2 closes Django's connections and forks its workers from a process that has used the
# database: the closed connections are idle in that process's pool, which the child inherits.
FORK_AFTER_USE = """
import json, os, django
django.setup()
from django.db import connection, connections
def backend():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]
before = backend()
connections.close_all()
read, write = os.pipe()
child = os.fork()
if child == 0:
    os.write(write, str(backend()).encode())
    connections.close_all()
    os._exit(0)
os.close(write)
in_child = int(os.read(read, 64))
os.waitpid(child, 0)
after = backend()
print(json.dumps({"parent": [before, after], "child": in_child}))
"""


@pytest.mark.scaled
@needs_postgresql
def test_a_forked_child_makes_its_own_pool_and_never_shares_the_parents_sessions(tmp_path):
    # A pool of one connection: a child that shared the parent's would get exactly that one.
    result = python(tmp_path, FORK_AFTER_USE, DATABASE_URL=os.environ["DATABASE_URL"],
                    DB_POOL_MIN_SIZE="1", DB_POOL_MAX_SIZE="1")
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["child"] not in seen["parent"], seen


def test_a_switch_takes_its_words_and_refuses_a_typo_at_start_up(tmp_path):
    """A word that is neither on nor off stops the settings from loading, naming the switch:
    read as off, `RUNNER_SELF_TEST=of` silently served every backend untested."""
    assert settings_with(tmp_path, "RUNNER_SELF_TEST", RUNNER_SELF_TEST="Off") == {
        "RUNNER_SELF_TEST": False}
    assert settings_with(tmp_path, "RUNNER_SELF_TEST", RUNNER_SELF_TEST="yes") == {
        "RUNNER_SELF_TEST": True}
    assert settings_with(tmp_path, "RUNNER_SELF_TEST", RUNNER_SELF_TEST="") == {
        "RUNNER_SELF_TEST": True}
    result = python(tmp_path, "from django.conf import settings; settings.DEBUG",
                    RUNNER_SELF_TEST="of")
    assert result.returncode != 0
    assert "RUNNER_SELF_TEST='of': a switch is one of" in result.stderr
