"""`python manage.py baselines --hardware SLUG [--level N]`: measure, import or export baselines.

Measuring runs on a runner host of that hardware: each published problem's reference is timed
eager and under torch.compile, in the sandboxed harness, by the evaluator's timing method.
"""

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.models import Hardware
from gpu_runner.management.commands.validate_problems import shard
from problems.baselines import (
    BaselineFileError,
    baselines_export_kernelbench,
    baselines_import_kernelbench,
)
from problems.models import Baseline, Problem


class Command(BaseCommand):
    help = (
        "Measure the baselines of every published problem on this host's device (eager and "
        "torch.compile), or --import / --export them in KernelBench's baseline JSON format."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--hardware", required=True, help="hardware slug, e.g. h200 or cpu")
        parser.add_argument("--level", type=int, action="append", default=[],
                            help="only this level (repeatable)")
        parser.add_argument("--problem", action="append", default=[],
                            help="only this problem slug, e.g. level1/19_ReLU (repeatable)")
        parser.add_argument("--modes", default="eager,compile",
                            help="comma-separated: eager, compile (default both)")
        parser.add_argument("--include-unpublished", action="store_true",
                            help="measure draft and validated problems too (not retired ones)")
        parser.add_argument("--missing-only", action="store_true",
                            help="measure only the modes a problem's current version lacks on "
                            "this hardware with this torch (to resume a long run)")
        parser.add_argument("--time-limit", type=float, default=None,
                            help="seconds per problem (default EVALUATION_TIME_LIMIT)")
        parser.add_argument("--batch", type=int, default=10,
                            help="problems per sandboxed process (default 10; 1 gives each "
                            "its own)")
        parser.add_argument("--compile-ahead", type=int, default=0, metavar="N",
                            help="with the compile mode: build the problems' compiled graphs "
                            "into the build cache N at a time on the CPU cores, then time them "
                            "one after another; 2N problems per round, each round's baselines "
                            "stored before the next begins (default 0: off)")
        parser.add_argument("--shard", default="",
                            help="K/N: only every N-th problem from the K-th (0-based), to split "
                            "a run over several GPUs of one host")
        parser.add_argument("--import", dest="import_path",
                            help="import KernelBench baseline JSON (a file, or a folder with "
                            "baseline_time_torch*.json)")
        parser.add_argument("--mode", choices=Baseline.Mode.values,
                            help="with --import of one file: which mode it holds "
                            "(default: compile when its name says so, else eager)")
        parser.add_argument("--torch-version", default="",
                            help="with --import: the torch version it was measured with")
        parser.add_argument("--export", dest="export_path",
                            help="write this hardware's baselines as KernelBench JSON files "
                            "into a folder")

    def handle(self, *args, **options) -> None:
        if options["import_path"] and options["export_path"]:
            raise CommandError("give --import or --export, not both")
        if options["import_path"]:
            return self.import_json(options)
        hardware = Hardware.objects.filter(slug=options["hardware"]).first()
        if options["export_path"]:
            if hardware is None:
                raise CommandError(f"no hardware {options['hardware']!r}")
            written = baselines_export_kernelbench(
                hardware=hardware, folder=Path(options["export_path"]), levels=options["level"]
            )
            if not written:
                raise CommandError(f"no baselines on {hardware.slug} to export")
            for mode, path in written.items():
                self.stdout.write(f"{mode}: {path}")
            return None
        return self.measure(hardware, options)

    def import_json(self, options) -> None:
        try:
            report = baselines_import_kernelbench(
                path=Path(options["import_path"]),
                hardware_slug=options["hardware"],
                mode=options["mode"],
                torch_version=options["torch_version"],
            )
        except BaselineFileError as error:
            raise CommandError(str(error)) from None
        for label, reason in report.skipped:
            self.stderr.write(f"skipped {label}: {reason}")
        self.stdout.write(
            f"imported {len(report.stored)} baselines on {options['hardware']}, "
            f"skipped {len(report.skipped)}"
        )

    def measure(self, hardware: Hardware | None, options) -> None:
        from evaluation.services import hardware_register
        from gpu_runner.curation import baselines_compile_ahead, baselines_measure
        from gpu_runner.detect import detect

        modes = [m.strip() for m in options["modes"].split(",") if m.strip()]
        unknown = set(modes) - set(Baseline.Mode.values)
        if not modes or unknown:
            raise CommandError(f"--modes takes eager and/or compile, not {options['modes']!r}")
        detected = detect(options["hardware"])
        if hardware is None:
            # A fresh site on a runner host: register the device as the runner would.
            detected.pop("slug")
            hardware = hardware_register(slug=options["hardware"], **detected)
        elif hardware.kind != detected["kind"]:
            raise CommandError(
                f"{hardware.slug} is a {hardware.kind} hardware but this host has "
                f"{detected['kind']} ({detected['name']}): run this on a {hardware.slug} host"
            )

        problems = Problem.objects.exclude(status=Problem.Status.RETIRED).filter(
            current_version__isnull=False
        )
        if not options["include_unpublished"]:
            problems = problems.filter(status=Problem.Status.PUBLISHED)
        if options["level"]:
            problems = problems.filter(level__in=options["level"])
        if options["problem"]:
            problems = problems.filter(slug__in=options["problem"])
            missing = set(options["problem"]) - set(problems.values_list("slug", flat=True))
            if missing:
                raise CommandError(f"no such problem(s) to measure: {', '.join(sorted(missing))}")
        problems = shard(list(problems.select_related("current_version")), options["shard"])
        # Each problem's modes to measure: all of them, or with --missing-only only those it
        # lacks (a resumed run does not measure again, and replace, what an earlier one stored).
        wanted = {p.pk: [m for m in modes if m not in self.have(p, hardware, detected)]
                  if options["missing_only"] else modes for p in problems}
        problems = [p for p in problems if wanted[p.pk]]
        if not problems:
            self.stdout.write("nothing to measure")
            return

        ahead = options["compile_ahead"] if "compile" in modes else 0
        self.stdout.write(f"measuring {len(problems)} problems on {hardware.slug} ({modes})")
        started = time.monotonic()
        failed = []

        def report(outcome) -> None:
            parts = []
            for mode in wanted[outcome.problem.pk]:
                if mode in outcome.stored:
                    stats = outcome.stored[mode].stats
                    text = f"{mode} {stats['median_ms']:.4g} ms"
                    if stats.get("compile_s") is not None:
                        text += f" (compiled in {stats['compile_s']:.1f} s)"
                    parts.append(text)
                else:
                    parts.append(f"{mode} FAILED: {outcome.errors.get(mode, '')[:300]}")
            if outcome.errors:
                failed.append(outcome.problem.slug)
            self.stdout.write(
                f"{outcome.problem.slug}: {'; '.join(parts)} [{outcome.seconds:.1f} s]"
            )

        # In rounds: a run that a time limit ends keeps every round it finished (--missing-only
        # resumes after them), where compiling all first would have stored nothing.
        step = 2 * ahead if ahead > 0 else len(problems)
        for start in range(0, len(problems), step):
            chunk = problems[start:start + step]
            to_compile = [p for p in chunk if "compile" in wanted[p.pk]]
            if ahead > 0 and to_compile:
                began = time.monotonic()
                failed_ahead = baselines_compile_ahead(
                    hardware=hardware, problems=to_compile, workers=ahead,
                    time_limit_s=options["time_limit"],
                )
                self.stdout.write(
                    f"compiled ahead: {len(to_compile) - len(failed_ahead)}/{len(to_compile)} "
                    f"problems in {time.monotonic() - began:.0f} s, {ahead} at a time"
                )
                for slug, why in failed_ahead.items():
                    self.stderr.write(f"not compiled ahead {slug}: {why[:300]}")
            # The problems that want the same modes measured together, in the chunk's order.
            for group_modes in dict.fromkeys(tuple(wanted[p.pk]) for p in chunk):
                baselines_measure(
                    hardware=hardware,
                    problems=[p for p in chunk if tuple(wanted[p.pk]) == group_modes],
                    modes=list(group_modes),
                    time_limit_s=options["time_limit"],
                    batch_size=options["batch"],
                    on_outcome=report,
                )
        elapsed = time.monotonic() - started
        self.stdout.write(
            f"measured {len(problems)} problems on {hardware.slug} in {elapsed:.0f} s "
            f"({len(failed)} with a mode that failed)"
        )

    @staticmethod
    def have(problem: Problem, hardware: Hardware, detected: dict) -> set[str]:
        """The modes measured for the problem's current version on this hardware and torch."""
        return set(
            Baseline.objects.filter(
                problem=problem,
                hardware=hardware,
                problem_version=problem.current_version,
                torch_version=detected["torch_version"],
                source="measured",
            ).values_list("mode", flat=True)
        )
