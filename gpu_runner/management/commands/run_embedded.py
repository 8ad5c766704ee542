"""`make run`: the whole platform on one machine (web + a CPU runner), stopped by one Ctrl-C.

DEBUG stays off unless asked for: the site is served as in production (a secret key kept in
var/secret-key, collected static files through whitenoise), on plain http at 127.0.0.1. A
runner or queue cluster that dies is started again, with a backoff, while the site stays up;
the work a dead runner held goes to the next one at once.
"""

import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.core.management.utils import get_random_secret_key
from django.utils import timezone
from django_q.models import OrmQ

from evaluation.services import hardware_register
from evaluator.process import die_with_parent_preexec
from gpu_runner import leased
from gpu_runner.detect import detect
from problems.services import samples_load

log = logging.getLogger(__name__)

# A child that lived this long had started fine: its next restart waits the shortest backoff.
STABLE_SECONDS = 60
MAX_BACKOFF_SECONDS = 60


def ensure_secret_key(path: Path) -> str:
    """The key kept in `path` (mode 0600), generated on first use."""
    if path.exists():
        path.chmod(0o600)
        return path.read_text().strip()
    key = get_random_secret_key()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(key + "\n")
    return key


def release_work_of(runner_name: str, *, queue: str) -> None:
    """Hand what a dead runner held to the next runner now, not after a lease or a retry.

    Its leases lapse at once (leased.release; the next runner's heartbeat sweep queues the
    work again), and, on the ORM broker, the tasks its cluster had taken, which the broker
    would hide for Q_RETRY seconds, are visible again. A task that another runner of the queue
    holds may so run twice: the claim lets one in.
    """
    leased.release(runner_name=runner_name)
    now = timezone.now()
    if not settings.REDIS_URL:
        OrmQ.objects.filter(key=queue, lock__gt=now).update(lock=now)


class Child:
    """A process started again, with a backoff, whenever it ends."""

    def __init__(self, name: str, args: list[str], *, env=None, on_exit=None) -> None:
        self.name, self.args, self.env, self.on_exit = name, args, env, on_exit
        self.process: subprocess.Popen | None = None
        self.started = 0.0
        self.restart_at = 0.0
        self.quick_exits = 0

    def start(self) -> None:
        # Its own session: Ctrl-C reaches run_embedded alone, which then signals each child
        # once. (A child in the terminal's group got the terminal's SIGINT and then our SIGTERM;
        # django-q2's cluster deadlocked on the second signal and, killed, left its workers
        # running.) Each dies with run_embedded too, should it be killed outright.
        self.process = subprocess.Popen(
            self.args, cwd=settings.BASE_DIR, env=self.env, start_new_session=True,
            preexec_fn=die_with_parent_preexec(),
        )
        self.started = time.monotonic()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def check(self) -> None:
        """Start it again once its backoff has passed, if it ended."""
        now = time.monotonic()
        if self.process is None:
            if now >= self.restart_at:
                log.warning("starting the %s again", self.name)
                self.start()
            return
        code = self.process.poll()
        if code is None:
            return
        pid, lived = self.process.pid, now - self.started
        self.process = None
        kill_group(pid)  # what it started (a cluster's workers) must not serve on as orphans
        if self.on_exit:
            try:
                self.on_exit(pid)
            except Exception:  # the database briefly busy: the lease and retry still hold
                log.exception("could not hand on the work of the %s", self.name)
        self.quick_exits = 0 if lived >= STABLE_SECONDS else self.quick_exits + 1
        delay = min(MAX_BACKOFF_SECONDS, 2 ** max(0, self.quick_exits - 1))
        self.restart_at = now + delay
        log.warning(
            "the %s (pid %s) ended with exit status %s after %.0f s; starting it again in %s s",
            self.name, pid, code, lived, delay,
        )

    def stop(self) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGTERM)

    def wait(self) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        kill_group(self.process.pid)  # whatever is left of its tree goes with it


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Command(BaseCommand):
    help = "Migrate, load samples, register cpu, start the web server, a runner and LLM workers."

    def handle(self, *args, **options) -> None:
        port = os.environ.get("PORT", "8000")
        if not os.environ.get("SECRET_KEY"):  # one from the environment wins
            settings.SECRET_KEY = ensure_secret_key(settings.SECRET_KEY_FILE)
        # Plain http on 127.0.0.1: the children answer there, with cookies that work over http.
        os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost")
        os.environ.setdefault("SECURE_COOKIES", "0")
        call_command("migrate", interactive=False, verbosity=0)
        if not settings.DEBUG:
            call_command("collectstatic", interactive=False, verbosity=0)  # whitenoise serves them
        outcomes = samples_load()
        detected = detect("cpu")
        detected.pop("slug")
        hardware = hardware_register(slug="cpu", **detected)
        admin = self._ensure_admin()

        web = Child("web server", [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", port,
                                   "kbsite.asgi:application"])
        host = socket.gethostname()
        children = [
            Child(
                "runner", [sys.executable, "manage.py", "runner", "--hardware", hardware.slug],
                # One machine for trying the site: it serves without per-evaluation cgroups
                # too, saying so in a warning line (runner.per_evaluation_limits_line).
                env={**os.environ, "RUNNER_REQUIRE_CGROUPS":
                     os.environ.get("RUNNER_REQUIRE_CGROUPS", "0")},
                # Names as gpu_runner/management/commands/runner.py gives them.
                on_exit=lambda pid: release_work_of(
                    f"{host}:{hardware.slug}:{pid}", queue=hardware.queue_name
                ),
            ),
            # Model runs: its worker count caps concurrent calls to LLM providers.
            Child(
                "generation queue", [sys.executable, "manage.py", "qcluster"],
                env={
                    **os.environ,
                    "Q_CLUSTER_NAME": "generation",
                    "Q_WORKERS": os.environ.get("GENERATION_WORKERS", "2"),
                },
            ),
        ]
        for child in [web, *children]:
            child.start()
        self.stdout.write(
            f"\nkbsite is running at http://127.0.0.1:{port}/ with {len(outcomes)} sample problems"
            f" and a cpu runner.\nAdmin: http://127.0.0.1:{port}/admin/ {admin}"
            "\nPress Ctrl-C to stop everything.\n"
        )
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # stopped like Ctrl-C
        try:
            while web.alive():  # without the web server there is nothing to keep up
                for child in children:
                    child.check()
                time.sleep(0.5)
            log.error("the web server ended (exit status %s): stopping", web.process.returncode)
        except KeyboardInterrupt:
            pass
        finally:
            for child in [web, *children]:
                child.stop()
            for child in [web, *children]:
                child.wait()

    def _ensure_admin(self) -> str:
        """An admin account: ADMIN_PASSWORD from the environment, or one generated and shown
        once. No password is kept in a file; `manage.py changepassword` sets a new one."""
        username = os.environ.get("ADMIN_USERNAME", "admin")
        password = os.environ.get("ADMIN_PASSWORD")
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        self._remove_plaintext_password(user)
        if user is None:
            generated = password is None
            password = password or secrets.token_urlsafe(12)
            User.objects.create_superuser(username=username, email="", password=password)
            if generated:
                return (
                    f"user {username!r} password {password!r} (shown this once: note it; "
                    f"`manage.py changepassword {username}` sets another)"
                )
            return f"user {username!r}, password from ADMIN_PASSWORD"
        if password:
            user.set_password(password)
            user.save(update_fields=["password"])
            return f"user {username!r}, password from ADMIN_PASSWORD"
        return (
            f"user {username!r} (password as set before; "
            f"`manage.py changepassword {username}` sets another)"
        )

    def _remove_plaintext_password(self, user) -> None:
        """Earlier versions kept the generated password in var/admin-password: it goes, shown
        one last time if it still logs in."""
        path = settings.VAR_DIR / "admin-password"
        if not path.exists():
            return
        password = path.read_text().strip()
        path.unlink()
        if user is not None and user.check_password(password):
            self.stdout.write(
                f"The admin password was kept in plain text in {path.name}, now removed: it is "
                f"{password!r}. Note it, or set another with `manage.py changepassword`."
            )
