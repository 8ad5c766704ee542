"""`make run`: the whole platform on one machine (web + a CPU runner), stopped by one Ctrl-C."""

import os
import secrets
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from evaluation.harness.process import die_with_parent_preexec
from evaluation.services import hardware_register
from gpu_runner.detect import detect
from problems.services import samples_load


class Command(BaseCommand):
    help = "Migrate, load samples, register cpu, start the web server, a runner and LLM workers."

    def handle(self, *args, **options) -> None:
        port = os.environ.get("PORT", "8000")
        call_command("migrate", interactive=False, verbosity=0)
        outcomes = samples_load()
        detected = detect("cpu")
        detected.pop("slug")
        hardware_register(slug="cpu", **detected)
        username, password = self._ensure_admin()

        # Each child in its own session: Ctrl-C reaches this process alone, which then signals
        # each child once. (A child in the terminal's group got the terminal's SIGINT and then
        # our SIGTERM; django-q2's cluster deadlocked on the second signal and, killed, left its
        # workers running.) Each dies with this process too, should it be killed outright.
        def start(args: list[str], **kwargs) -> subprocess.Popen:
            return subprocess.Popen(args, cwd=settings.BASE_DIR, start_new_session=True,
                                    preexec_fn=die_with_parent_preexec(), **kwargs)

        processes = [
            start([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", port,
                   "kbsite.asgi:application"]),
            start([sys.executable, "manage.py", "runner", "--hardware", "cpu"]),
            # Model runs: its worker count caps concurrent calls to LLM providers.
            start(
                [sys.executable, "manage.py", "qcluster"],
                env={
                    **os.environ,
                    "Q_CLUSTER_NAME": "generation",
                    "Q_WORKERS": os.environ.get("GENERATION_WORKERS", "2"),
                },
            ),
        ]
        self.stdout.write(
            f"\nkbsite is running at http://127.0.0.1:{port}/ with {len(outcomes)} sample problems"
            f" and a cpu runner.\nAdmin: http://127.0.0.1:{port}/admin/ user {username!r}"
            + (f" password {password!r}" if password else " (password as set before)")
            + "\nPress Ctrl-C to stop everything.\n"
        )
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # stopped like Ctrl-C
        try:
            while all(process.poll() is None for process in processes):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            for process in processes:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
                # Whatever is left of its tree (a cluster's workers) goes with it.
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def _ensure_admin(self) -> tuple[str, str | None]:
        """An admin account: ADMIN_PASSWORD from the environment, or one generated once."""
        username = os.environ.get("ADMIN_USERNAME", "admin")
        password_file = settings.VAR_DIR / "admin-password"
        password = os.environ.get("ADMIN_PASSWORD")
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            password = password or secrets.token_urlsafe(12)
            User.objects.create_superuser(username=username, email="", password=password)
            if "ADMIN_PASSWORD" not in os.environ:
                password_file.write_text(password)
                password_file.chmod(0o600)
        elif password:
            user.set_password(password)
            user.save(update_fields=["password"])
        elif password_file.exists():
            password = password_file.read_text().strip()
        return username, password
