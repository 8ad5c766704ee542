"""kbsite settings: one file, switched by environment variables alone.

Embedded default: SQLite, django-q2's ORM broker, in-memory channel layer fed across processes
by the live-event relay (kbsite/live.py). `DATABASE_URL` and `REDIS_URL` switch to the scaled
setup (PostgreSQL, Redis broker, channels-redis).
"""

import ipaddress
import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlparse

from evaluator.config import DEFAULT_TIME_LIMIT_S

BASE_DIR = Path(__file__).resolve().parent.parent


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}


def env_bool(name: str, default: bool = False) -> bool:
    """A switch: one of TRUE_WORDS or FALSE_WORDS (any case), unset or empty for the default.
    Any other word stops the site at start-up: read as off, a typo (`DEBUG=ture`,
    `RUNNER_SELF_TEST=of`) silently changed what the operator asked for."""
    value = (os.environ.get(name) or "").strip().lower()
    if not value:
        return default
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise ValueError(f"{name}={os.environ[name]!r}: a switch is one of "
                     f"{', '.join(sorted(TRUE_WORDS | FALSE_WORDS))}")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in env(name, default).split(",") if item.strip()]


def database_from_url(url: str) -> dict:
    """A Django DATABASES entry from a postgres:// URL (the only scaled database we support).

    Connections come from Django's PostgreSQL connection pool (psycopg_pool), one pool per
    process, unless DB_POOL=0. Daphne runs each request in a thread of its own, so persistent
    connections (CONN_MAX_AGE) were never reused there: every request opened a new PostgreSQL
    session. A pooled connection goes back to the pool when Django closes it at the end of the
    request, so CONN_MAX_AGE must be 0 with the pool (Django refuses anything else).
    """
    parts = urlparse(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        raise ValueError(f"DATABASE_URL must be a postgres:// URL, not {parts.scheme}://")
    options: dict = dict(parse_qsl(parts.query))
    pooled = env_bool("DB_POOL", True)
    if pooled:
        options["pool"] = {
            # Kept open per process; the pool grows to max_size on demand and closes what
            # stays idle past max_idle (10 min) back down to min_size.
            "min_size": env_int("DB_POOL_MIN_SIZE", 2),
            "max_size": env_int("DB_POOL_MAX_SIZE", 10),
            # How long a request waits for a free connection before failing (a 503 with
            # Retry-After, from kbsite.middleware.DatabaseUnavailableMiddleware).
            "timeout": float(env("DB_POOL_TIMEOUT", "10")),
        }
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        "OPTIONS": options,
        # Without the pool: how long a thread keeps its connection (DB_CONN_MAX_AGE seconds).
        "CONN_MAX_AGE": 0 if pooled else env_int("DB_CONN_MAX_AGE", 60),
        # With the pool, the pool checks each connection as it hands it out.
        "CONN_HEALTH_CHECKS": True,
    }


VAR_DIR = Path(env("KBSITE_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

# Off unless asked for (DEBUG=1): `make run` is production-like on 127.0.0.1.
DEBUG = env_bool("DEBUG", default=False)

# SECRET_KEY from the environment wins; else the key `make run` generates and keeps in var/.
# Without either, with DEBUG off, it stays empty: the web server (kbsite/asgi.py) and the runner
# (django-q signs every queued task with it) refuse to start, while other commands still load.
SECRET_KEY_FILE = VAR_DIR / "secret-key"


def secret_key_from_file(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


SECRET_KEY = env("SECRET_KEY") or secret_key_from_file(SECRET_KEY_FILE)
if not SECRET_KEY and DEBUG:
    SECRET_KEY = "insecure-development-key-only-for-debug"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver" if DEBUG else "")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and Redoc assets from the installed package
    "channels",
    "django_q",
    "axes",  # login throttling and lockout
    "kbsite",
    "accounts",
    "problems",
    "evaluation",
    "submissions",
    "leaderboard",
    "competitions",
    "gpu_runner",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "kbsite.middleware.SecurityHeadersMiddleware",  # content security policy and friends
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "kbsite.middleware.DatabaseUnavailableMiddleware",  # 503 + Retry-After, not a 500
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out login into its page
]

ROOT_URLCONF = "kbsite.urls"
ASGI_APPLICATION = "kbsite.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# A forked child (django-q2 forks its workers and monitor from a sentinel that has used the
# database) must not use the pools it inherits: their idle connections are the parent's
# sessions, and a child that took one would talk on the parent's socket, while closing or
# freeing one would end the parent's session. The child keeps them referenced, untouched, and
# its first query makes a pool of its own.
_inherited_pools: list = []


def _leave_pools_to_parent() -> None:
    import sys

    base = sys.modules.get("django.db.backends.postgresql.base")
    if base is None:
        return  # no pool was ever made in this process
    pools = base.DatabaseWrapper._connection_pools
    _inherited_pools.extend(pools.values())
    pools.clear()


DATABASE_URL = env("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {"default": database_from_url(DATABASE_URL)}
    if "pool" in DATABASES["default"]["OPTIONS"]:
        os.register_at_fork(after_in_child=_leave_pools_to_parent)
else:
    # WAL and an immediate write lock let the web process, the relay and runner processes
    # share one SQLite file without "database is locked" on every concurrent write.
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": env("SQLITE_PATH", str(VAR_DIR / "db.sqlite3")),
            "OPTIONS": {
                "timeout": 30,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
            # Tests use a file, not memory, because runner processes must share it; one file
            # per test session so that concurrent test runs never share a database.
            "TEST": {
                "NAME": env("SQLITE_TEST_PATH", str(VAR_DIR / f"test-db-{os.getpid()}.sqlite3"))
            },
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Login brute force (django-axes): after AXES_FAILURE_LIMIT failed logins for one username from
# one address, that pair is locked out for AXES_COOLOFF_MINUTES. The API's tokens never go
# through a password login, so axes does not touch them.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out login
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "kbsite.views.login_locked_out"  # the login page, saying why

# Sign-up is throttled per client address (accounts/throttling.py): at most this many accounts
# an hour from one address (an IPv6 address counts by its /64), counted in the database, so that
# every web process sees the same count. 0 turns it off.
SIGNUP_THROTTLE_PER_HOUR = env_int("SIGNUP_THROTTLE_PER_HOUR", 5)
# The client address is REMOTE_ADDR, unless that is one of these proxies (addresses or networks,
# comma-separated): then it is the right-most address of X-Forwarded-For that is not one of them.
# Empty: X-Forwarded-For is never read (a client could write anything there).
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES")
for _proxy in TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ValueError(f"TRUSTED_PROXIES: {_proxy!r} is not an address or network") from None

# "required": a new account gives an email address at sign-up and may log in at once, but may
# submit only once it has followed the link sent there (accounts.services.may_submit). "none"
# (the default) asks for no email, so `make run` needs no mail server.
ACCOUNT_EMAIL_VERIFICATION = env("ACCOUNT_EMAIL_VERIFICATION", "none")
if ACCOUNT_EMAIL_VERIFICATION not in ("none", "required"):
    raise ValueError(
        f"ACCOUNT_EMAIL_VERIFICATION={ACCOUNT_EMAIL_VERIFICATION!r}: 'none' or 'required'"
    )
# How long a verification link works (it is signed with SECRET_KEY and carries its time).
ACCOUNT_EMAIL_VERIFICATION_HOURS = env_int("ACCOUNT_EMAIL_VERIFICATION_HOURS", 48)
# Mail goes out through EMAIL_HOST over SMTP; without one it is written to the web process's
# log (Django's console backend), enough to follow a link on one's own machine.
EMAIL_HOST = env("EMAIL_HOST")
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend"
)
EMAIL_PORT = env_int("EMAIL_PORT", 587)
EMAIL_HOST_USER = env("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
EMAIL_TIMEOUT = 10  # seconds; a sign-up must not hang on a mail server that does not answer
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "kbsite <noreply@localhost>")

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns about a missing folder
STATICFILES_DIRS = [BASE_DIR / "static"]
# The submit page's code editor: CodeMirror 5 from npm (package.json; `make` runs `npm ci`),
# served from node_modules/ under static/codemirror/, never copied into the repository. Without
# node_modules the pages keep their plain textarea (submissions.forms.CodeEditor).
CODEMIRROR_DIR = BASE_DIR / "node_modules" / "codemirror"
CODE_EDITOR_ASSETS = (CODEMIRROR_DIR / "lib" / "codemirror.js").is_file()
if CODE_EDITOR_ASSETS:
    STATICFILES_DIRS += [
        ("codemirror/lib", CODEMIRROR_DIR / "lib"),
        ("codemirror/mode/python", CODEMIRROR_DIR / "mode" / "python"),
    ]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

REDIS_URL = env("REDIS_URL")

# django-q2: one queue ("cluster") per hardware, named by the hardware's slug; a runner serves
# one of them with Q_CLUSTER_NAME=<slug>. `timeout` (an evaluation's hard stop) stays below
# `retry` (when an unacknowledged task is handed out again), so a running evaluation is never
# given to a second worker; a runner killed mid-evaluation is retried after `retry` seconds.
# On a GPU shared by N evaluations (RUNNER_EVALUATIONS_PER_GPU) a task may wait for device
# memory (half its time limit, then behind a reservation: at most the running evaluations' and
# the reserved runs' limits, N) and build its extension ahead (its own limit), wait so again and
# run, and, out of memory beside the others, run again alone with its whole limit after a wait
# of at most N limits and a minute (evaluator/runner/sandbox.py): 3N + 5 limits cover them; the
# limit itself stops a hung evaluation long before. The generation queue keeps its own, shorter
# timeout (GENERATION_Q_TIMEOUT, in ALT_CLUSTERS).
EVALUATION_TIME_LIMIT = env_int("EVALUATION_TIME_LIMIT", int(DEFAULT_TIME_LIMIT_S))
# At most this many timed calls per side of an evaluation (0: the judge's own cap, 100 on the
# CPU and 500 on a GPU, evaluator/config.py). Fewer calls widen a median's interval; the test
# suite takes 30 (tests/environment.py): a CPU evaluation spends most of its time timing, and
# no test compares figures that close.
EVALUATION_MAX_REPS = env_int("EVALUATION_MAX_REPS", 0)
if 0 < EVALUATION_MAX_REPS < 3:
    # Fewer than 3 calls give no interval: the judge's clock could never confirm a timing.
    raise ValueError(f"EVALUATION_MAX_REPS={EVALUATION_MAX_REPS}: 0 (the judge's cap) or 3 and up")
_EVALUATIONS_PER_GPU = env_int("RUNNER_EVALUATIONS_PER_GPU", 4)
Q_TIMEOUT = env_int("Q_TIMEOUT", (3 * _EVALUATIONS_PER_GPU + 5) * EVALUATION_TIME_LIMIT + 60)
Q_RETRY = env_int("Q_RETRY", Q_TIMEOUT + 60)
Q_CLUSTER = {
    "name": "kbsite",
    "workers": env_int("Q_WORKERS", 1),
    "recycle": 50,
    "timeout": Q_TIMEOUT,
    "retry": Q_RETRY,
    "max_attempts": env_int("Q_MAX_ATTEMPTS", 3),
    "ack_failures": True,
    "save_limit": 1000,
    "poll": 0.2,
    "catch_up": False,
    "label": "Task queue",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"
# The hardware queues get the limits above, the generation queue its own; ALT_CLUSTERS must
# exist for django-q2 to accept a Q_CLUSTER_NAME other than the default one.
# A model-run step ends 30 s before its queue's timeout (submissions/runs/services.py).
GENERATION_Q_TIMEOUT = env_int("GENERATION_Q_TIMEOUT", 2 * EVALUATION_TIME_LIMIT + 60)
Q_CLUSTER["ALT_CLUSTERS"] = {
    "generation": {"timeout": GENERATION_Q_TIMEOUT, "retry": GENERATION_Q_TIMEOUT + 60}}

# Throttle counters live in the cache: shared through Redis when there is one.
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": REDIS_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py 8 gives up on a read after 5 s by default, the time channels-redis blocks
            # waiting for a message, so idle websocket consumers died with a TimeoutError.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# How often the relay in each web process looks for events written by other processes.
LIVE_RELAY_INTERVAL = float(env("LIVE_RELAY_INTERVAL", "0.25"))

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    # JSON with a nesting limit: a deeply nested body is a 400, not a RecursionError.
    "DEFAULT_PARSER_CLASSES": [
        "kbsite.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "kbsite API",
    "DESCRIPTION": "Submit GPU kernels for KernelBench-style problems and read their evaluations.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Submissions: size limit, and quotas on top of the API throttles (0 turns a quota off).
QUOTA_MAX_QUEUED = env_int("QUOTA_MAX_QUEUED", 200)
QUOTA_GPU_SECONDS_PER_DAY = env_int("QUOTA_GPU_SECONDS_PER_DAY", 3600)
# Nsight Compute reports one user may ask for per UTC day (each holds a GPU for seconds).
QUOTA_NCU_REPORTS_PER_DAY = env_int("QUOTA_NCU_REPORTS_PER_DAY", 10)
# Re-verifications an owner may ask for per UTC day, for results held because their timing did
# not reproduce (each is one more evaluation, two where a third breaks a disagreement).
QUOTA_REVERIFICATIONS_PER_DAY = env_int("QUOTA_REVERIFICATIONS_PER_DAY", 3)
LOG_DISPLAY_MAX_CHARS = env_int("LOG_DISPLAY_MAX_CHARS", 64 * 1024)
SUBMISSION_MAX_BYTES = env_int("SUBMISSION_MAX_BYTES", 256 * 1024)
BUILD_CACHE_DIR = Path(env("BUILD_CACHE_DIR", str(VAR_DIR / "build-cache")))

# Model runs (litellm): retries with backoff for rate limits and provider errors. The
# generation queue's worker count (GENERATION_WORKERS) caps concurrent calls to providers.
LLM_MAX_ATTEMPTS = env_int("LLM_MAX_ATTEMPTS", 5)
LLM_RETRY_BASE_SECONDS = float(env("LLM_RETRY_BASE_SECONDS", "2"))
LLM_RETRY_MAX_SECONDS = float(env("LLM_RETRY_MAX_SECONDS", "60"))
LLM_REQUEST_TIMEOUT = float(env("LLM_REQUEST_TIMEOUT", "300"))
RUN_WATCH_SECONDS = float(env("RUN_WATCH_SECONDS", "2"))

# Runners
RUNNER_HEARTBEAT_SECONDS = env_int("RUNNER_HEARTBEAT_SECONDS", 5)
RUNNER_OFFLINE_AFTER_SECONDS = env_int("RUNNER_OFFLINE_AFTER_SECONDS", 30)
# A runner renews its claim on a running submission; a claim not renewed for this long means the
# runner died, and the submission is queued again.
RUNNER_LEASE_SECONDS = env_int("RUNNER_LEASE_SECONDS", 60)
# A submission whose evaluation has killed this many runners is stopped with its own verdict.
SUBMISSION_MAX_ATTEMPTS = env_int("SUBMISSION_MAX_ATTEMPTS", 3)
# Evaluations run at once on one GPU (evaluator/gate.py): their untimed phases share
# it, each one's timed calls have it alone, and one starts only when its memory fits beside the
# others'. 1 gives each evaluation the whole GPU. CPU slots are set with `runner --devices N`.
RUNNER_EVALUATIONS_PER_GPU = _EVALUATIONS_PER_GPU
# The profiled call of a GPU evaluation in a sandboxed process of its own, whose profiler is
# started ahead (evaluator/judge/workers.py, Profiler); off: the timed worker makes it after its
# timing, paying the profiler's start (seconds) inside the evaluation.
RUNNER_PROFILE_PROCESS = env_bool("RUNNER_PROFILE_PROCESS", True)
# A runner offers a backend only after its self-test (evaluator/runner/selftest.py): the
# backend's packages import and its starter kernel is judged correct in the sandbox, at start.
# Off: every backend the device kind can run is offered untested (the tests' default, whose
# runners start by the dozen; a cold C++ build alone takes half a minute).
RUNNER_SELF_TEST = env_bool("RUNNER_SELF_TEST", True)
# Sign-up is open, so a runner refuses to serve where it cannot give each evaluation a cgroup
# of its own (its memory and processes bounded as a sum: evaluator/runner/limits.py), unless the
# operator says it may (off). `make run` says so for its own runner, with a warning.
RUNNER_REQUIRE_CGROUPS = env_bool("RUNNER_REQUIRE_CGROUPS", True)
# A GPU runner, as it starts, asks for a validation of each published problem its hardware has
# none of (problems.curation.validations_missing_request): their measured peaks admit
# evaluations beside each other; until then a problem is assumed to need UNKNOWN_PEAK_BYTES.
RUNNER_VALIDATE_MISSING = env_bool("RUNNER_VALIDATE_MISSING", True)
# Where the runners of this host keep each GPU's gate (its locks and memory ledger).
RUNNER_GATE_DIR = Path(env("RUNNER_GATE_DIR", str(VAR_DIR / "gates")))

# Re-verification: a result that would set a new record on its board is held off the boards and
# evaluated again with fresh secret seeds, on another runner where one is live, before it ranks.
REVERIFY_NEW_RECORDS = env_bool("REVERIFY_NEW_RECORDS", True)
# The two speedups (over the reference timed beside the kernel; medians where there is none) are
# compared by their 95% confidence intervals from the timing samples (evaluation/stats.py): when
# they overlap the record ranks on the slower of the two; when they do not it is held off the
# boards with the note "timing not reproduced" (never an exploit flag).
# Each interval is at least this share of its value wide on each side: run-to-run noise that one
# run's samples cannot see. The boards' intervals (and ties) use the same floor.
TIMING_INTERVAL_FLOOR = float(env("TIMING_INTERVAL_FLOOR", "0.02"))
# With no other runner of the hardware live, the runner that did the first evaluation may run the
# re-verification itself once it has waited this long (time for another runner to come back).
REVERIFY_SOLE_RUNNER_GRACE_SECONDS = env_int("REVERIFY_SOLE_RUNNER_GRACE_SECONDS", 30)

if not DEBUG:
    # Cookies over https only; `make run` turns that off for its plain http on 127.0.0.1.
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", True)
    SECURE_CONTENT_TYPE_NOSNIFF = True
    if env_bool("BEHIND_TLS_PROXY"):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
        SECURE_SSL_REDIRECT = True
        SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
        SECURE_HSTS_INCLUDE_SUBDOMAINS = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        "LiteLLM": {"level": "WARNING"},  # it logs every call at INFO
    },
}
