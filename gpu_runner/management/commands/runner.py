"""`python manage.py runner [--hardware SLUG]`: detect the device, register it, serve its queue.

On a host with several GPUs one command serves them all: one queue worker per GPU, each pinned
to its GPU with CUDA_VISIBLE_DEVICES and running one evaluation at a time, each with its own
heartbeat; the hardware is registered once with its GPU count.
"""

import os
import signal
import socket
import subprocess
import sys
import time

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from evaluation.services import hardware_register, runner_heartbeat
from gpu_runner import leased
from gpu_runner.detect import detect, self_tested, untested
from problems.curation import validations_missing_request


def parse_devices(value: str | None, gpu_count: int) -> list[int | None]:
    """Device slots to serve: every GPU by default, `--devices 0,2` for some of them.

    On a host without GPUs, `--devices N` runs N CPU slots (several CPU evaluations at once).
    """
    if not value:
        return list(range(gpu_count)) if gpu_count else [None]
    try:
        numbers = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise CommandError(f"--devices takes numbers like 0,1 (got {value!r})") from None
    if gpu_count:
        if not numbers or not set(numbers) <= set(range(gpu_count)):
            raise CommandError(f"this host has GPUs 0..{gpu_count - 1}; asked for {value}")
        return numbers
    if len(numbers) != 1 or numbers[0] < 1:
        raise CommandError("on a host without GPUs, --devices is a number of slots")
    return list(range(numbers[0]))


def require_secret_key() -> None:
    """Refuse to start without the web tier's SECRET_KEY, rather than drop every task later.

    django-q signs each queued task with it (the payload is a pickle: an unsigned one would run
    whatever a writer to the broker put there), so a runner with another key, or none, cannot
    read a single task.
    """
    try:
        settings.SECRET_KEY  # noqa: B018  (Django refuses an empty one here)
    except ImproperlyConfigured:
        raise CommandError(
            "SECRET_KEY must be set to the web tier's key: django-q signs every queued task "
            "with it (docs/deploy.md, Runners)"
        ) from None


def per_evaluation_limits_line() -> str:
    """The self-test's line on how one evaluation's memory and processes are bounded: as a sum
    (a cgroup of its own per evaluation) or each process and /tmp on their own. Without the
    first, a runner refuses to serve unless the operator allows it (RUNNER_REQUIRE_CGROUPS=0):
    sign-up is open, and forked children and /tmp together held 9 to 10 GB of one host's memory
    for one evaluation."""
    from evaluator.runner.limits import cgroup_parent

    parent, why = cgroup_parent()
    if parent:
        return (f"per-evaluation cgroups: yes, under {parent}: each evaluation's memory and "
                "processes are bounded as a sum")
    line = (f"per-evaluation cgroups: no ({why}): each process and the evaluation's /tmp stay "
            "within their own limits, but not together")
    if settings.RUNNER_REQUIRE_CGROUPS:
        raise CommandError(
            line + ". With open sign-up a runner does not serve so; give it a delegated cgroup "
            "v2 folder (KB_CGROUP_ROOT, docs/deploy.md), or allow it with "
            "RUNNER_REQUIRE_CGROUPS=0")
    return "warning: " + line + " (allowed: RUNNER_REQUIRE_CGROUPS=0)"


class Command(BaseCommand):
    help = "Serve a hardware's evaluation queue: one worker per GPU (detects and registers it)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--hardware", help="hardware slug to serve (default: detected)")
        parser.add_argument(
            "--devices",
            help="GPUs to serve, e.g. 0,1 (default: every GPU); on a CPU host, a number of slots",
        )

    def handle(self, *args, **options) -> None:
        require_secret_key()
        self.stdout.write(per_evaluation_limits_line())
        detected = detect(options.get("hardware"))
        if settings.RUNNER_SELF_TEST:
            detected["backends"] = self_tested(detected, build_dir=str(settings.BUILD_CACHE_DIR),
                                               log=self.stdout.write)
        else:
            detected["backends"] = untested(detected, log=self.stdout.write)
        slug = detected.pop("slug")
        hardware = hardware_register(slug=slug, **detected)
        if settings.RUNNER_VALIDATE_MISSING:
            asked = validations_missing_request(hardware=hardware)
            if asked:
                self.stdout.write(f"asked for {len(asked)} validation(s) this hardware lacks")
        devices = parse_devices(options.get("devices"), detected.get("gpu_count") or 0)
        host = socket.gethostname()
        base = f"{host}:{slug}:{os.getpid()}"
        names = {device: base if device is None else f"{base}:dev{device}" for device in devices}
        workers = {d: self._start_worker(hardware, names[d], d) for d in devices}
        self.stdout.write(
            f"runner {base} serving queue {hardware.queue_name} ({hardware.name}) "
            f"on {len(devices)} device slot(s)"
        )

        stopping = False

        def stop(signum, frame) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        try:
            while not stopping and all(w.poll() is None for w in workers.values()):
                try:
                    for device, name in names.items():
                        runner_heartbeat(
                            name=name, hardware=hardware, host=host, pid=workers[device].pid,
                            device_index=device,
                        )
                    # Work whose runner died, or whose task never reached the broker.
                    enqueued = leased.sweep(hardware=hardware)
                    if any(enqueued.values()):
                        counts = ", ".join(f"{n} {kind}" for kind, n in enqueued.items() if n)
                        self.stdout.write(f"requeued {counts}")
                except Exception as error:  # database briefly gone: keep serving, retry
                    self.stderr.write(f"heartbeat failed: {error}")
                deadline = time.monotonic() + settings.RUNNER_HEARTBEAT_SECONDS
                while (
                    not stopping
                    and all(w.poll() is None for w in workers.values())
                    and time.monotonic() < deadline
                ):
                    time.sleep(0.2)
        finally:
            for worker in workers.values():
                if worker.poll() is None:
                    worker.send_signal(signal.SIGTERM)
            for worker in workers.values():
                try:
                    worker.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    worker.kill()
        sys.exit(max(w.returncode or 0 for w in workers.values()))

    def _start_worker(self, hardware, name: str, device: int | None) -> subprocess.Popen:
        """A django-q2 cluster for one device (worker_env).

        Its workers hold the database settings they need to claim and store results; each
        starts its evaluations in sandboxed grandchildren that get none of them.
        """
        return subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            env=worker_env(hardware, name, device),
            cwd=settings.BASE_DIR,
        )


def worker_env(hardware, name: str, device: int | None) -> dict[str, str]:
    """The environment of one device's cluster: RUNNER_EVALUATIONS_PER_GPU workers on a GPU,
    whose evaluations share it and are each timed with it alone (evaluator/gate.py);
    one on a CPU slot."""
    env = {
        **os.environ,
        "Q_CLUSTER_NAME": hardware.queue_name,
        "KBSITE_RUNNER_NAME": name,
        # CPU slots are numbered too (`--devices N`): the hardware's kind decides.
        "Q_WORKERS": str(max(1, settings.RUNNER_EVALUATIONS_PER_GPU)
                         if hardware.kind != hardware.Kind.CPU else 1),
        # The next judge and worker start ahead (imports, CUDA context) while one runs;
        # each pair serves exactly one evaluation.
        "KB_HARNESS_PRESTART": os.environ.get("KB_HARNESS_PRESTART", "1"),
    }
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(device)
        env["KBSITE_DEVICE_INDEX"] = str(device)
    return env
