"""`python manage.py validate_problems --hardware SLUG [--level N] [--here] [--report]`.

Queues a validation of each selected problem on the hardware's runners; with --here it runs them
one by one in the sandboxed harness on this host instead (a runner host with no queue running);
--report prints the latest validations of the selection and runs nothing.
"""

import os
import socket
import time

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q

from evaluation.models import Hardware
from problems.curation import validation_request
from problems.models import Problem, Validation


def shard(items: list, spec: str) -> list:
    """Items k, k+n, k+2n... for spec "k/n" (all of them for an empty spec)."""
    if not spec:
        return items
    try:
        k, n = (int(part) for part in spec.split("/"))
    except ValueError:
        raise CommandError(f"--shard takes K/N, e.g. 0/8, not {spec!r}") from None
    if not 0 <= k < n:
        raise CommandError(f"--shard {spec}: K must be at least 0 and below N")
    return items[k::n]


class Command(BaseCommand):
    help = "Validate problems' references on a hardware (queued, or --here), or --report."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--hardware", required=True)
        parser.add_argument("--level", type=int, action="append", default=[])
        parser.add_argument("--problem", action="append", default=[], help="a problem slug")
        parser.add_argument("--here", action="store_true",
                            help="run the validations on this host now, not through the queue")
        parser.add_argument("--missing-only", action="store_true",
                            help="skip problems whose current version already has a finished "
                            "validation on this hardware (to resume a long run)")
        parser.add_argument("--report", action="store_true",
                            help="only print the latest validation of each selected problem")
        parser.add_argument("--batch", type=int, default=20,
                            help="with --here: problems per sandboxed process (default 20; "
                            "1 gives each its own)")
        parser.add_argument("--shard", default="",
                            help="K/N: only every N-th problem from the K-th (0-based), to split "
                            "a run over several GPUs of one host")

    def handle(self, *args, **options) -> None:
        problems = Problem.objects.exclude(status=Problem.Status.RETIRED).filter(
            current_version__isnull=False
        )
        if options["level"]:
            problems = problems.filter(level__in=options["level"])
        if options["problem"]:
            problems = problems.filter(slug__in=options["problem"])
        problems = shard(list(problems.select_related("current_version")), options["shard"])
        if not problems:
            raise CommandError("no problems match")
        hardware = Hardware.objects.filter(slug=options["hardware"]).first()
        if options["report"]:
            if hardware is None:
                raise CommandError(f"no hardware {options['hardware']!r}")
            return self.report(problems, hardware)
        if hardware is None:
            if not options["here"]:
                raise CommandError(
                    f"no hardware {options['hardware']!r}: start a runner for it first"
                )
            from evaluation.services import hardware_register
            from gpu_runner.detect import detect

            detected = detect(options["hardware"])
            detected.pop("slug")
            hardware = hardware_register(slug=options["hardware"], **detected)
        if options["missing_only"]:
            done = set(
                Validation.objects.filter(
                    hardware=hardware, status__in=Validation.FINISHED
                ).values_list("problem_version_id", flat=True)
            )
            problems = [p for p in problems if p.current_version_id not in done]

        validations = [
            validation_request(problem=p, hardware=hardware, enqueue=not options["here"])
            for p in problems
        ]
        if not options["here"]:
            self.stdout.write(f"queued {len(validations)} validations on {hardware.queue_name}")
            return None
        from gpu_runner.curation import validations_run

        runner = f"{socket.gethostname()}:validate_problems:{os.getpid()}"
        started = time.monotonic()
        validations_run(
            validations=validations,
            runner_name=runner,
            batch_size=options["batch"],
            on_done=self.write_line,
        )
        self.stdout.write(
            f"validated {len(validations)} problems on {hardware.slug} in "
            f"{time.monotonic() - started:.0f} s"
        )
        return self.report(problems, hardware)

    def write_line(self, validation: Validation) -> None:
        codes = ",".join(f["code"] for f in validation.findings) or "-"
        memory = (
            f"{validation.peak_memory_bytes / 2**30:.2f} GiB"
            if validation.peak_memory_bytes is not None else "-"
        )
        ms = f"{validation.reference_ms:.4g} ms" if validation.reference_ms is not None else "-"
        self.stdout.write(
            f"{validation.problem_version.problem.slug}: {validation.status} {codes} "
            f"ref {ms} peak {memory}"
        )

    def report(self, problems: list[Problem], hardware: Hardware) -> None:
        latest = {}
        for validation in (
            Validation.objects.filter(
                Q(problem_version_id__in=[p.current_version_id for p in problems]),
                hardware=hardware,
                status__in=Validation.FINISHED,
            )
            .select_related("problem_version__problem")
            .order_by("-finished_at")
        ):
            latest.setdefault(validation.problem_version_id, validation)
        counts: dict[str, int] = {}
        flagged = []
        for problem in problems:
            validation = latest.get(problem.current_version_id)
            status = validation.status if validation else "not validated"
            counts[status] = counts.get(status, 0) + 1
            if validation and validation.findings:
                flagged.append(validation)
        self.stdout.write(
            f"{hardware.slug}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        )
        for validation in flagged:
            self.stdout.write(f"- {validation.problem_version.problem.slug} ({validation.status})")
            for finding in validation.findings:
                self.stdout.write(f"    {finding['code']}: {finding['message']}")
