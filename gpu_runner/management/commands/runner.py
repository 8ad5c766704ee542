"""`python manage.py runner [--hardware SLUG]`: detect the device, register it, serve its queue."""

import os
import signal
import socket
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand

from evaluation.services import hardware_register, runner_heartbeat
from gpu_runner.detect import detect
from gpu_runner.services import requeue_abandoned


class Command(BaseCommand):
    help = "Serve a hardware's evaluation queue (detects the device and registers it)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--hardware", help="hardware slug to serve (default: detected)")

    def handle(self, *args, **options) -> None:
        detected = detect(options.get("hardware"))
        slug = detected.pop("slug")
        hardware = hardware_register(slug=slug, **detected)
        host = socket.gethostname()
        name = f"{host}:{slug}:{os.getpid()}"
        self.stdout.write(f"runner {name} serving queue {hardware.queue_name} ({hardware.name})")

        # The queue worker is a child: it holds the database settings it needs to claim and
        # store results, and starts each evaluation in a sandboxed grandchild with none.
        env = {
            **os.environ,
            "Q_CLUSTER_NAME": hardware.queue_name,
            "KBSITE_RUNNER_NAME": name,
            "Q_WORKERS": "1",  # one evaluation at a time on a device
        }
        cluster = subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"], env=env, cwd=settings.BASE_DIR
        )

        stopping = False

        def stop(signum, frame) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        try:
            while not stopping and cluster.poll() is None:
                try:
                    runner_heartbeat(name=name, hardware=hardware, host=host, pid=os.getpid())
                    requeued = requeue_abandoned(hardware_slug=hardware.slug)
                    if requeued:
                        self.stdout.write(f"requeued {requeued} abandoned submission(s)")
                except Exception as error:  # database briefly gone: keep serving, retry
                    self.stderr.write(f"heartbeat failed: {error}")
                deadline = time.monotonic() + settings.RUNNER_HEARTBEAT_SECONDS
                while not stopping and cluster.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.2)
        finally:
            if cluster.poll() is None:
                cluster.send_signal(signal.SIGTERM)
                try:
                    cluster.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    cluster.kill()
        sys.exit(cluster.returncode or 0)
