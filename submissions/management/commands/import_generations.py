"""`python manage.py import_generations FOLDER --model NAME --hardware SLUG`."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.models import Hardware
from submissions.runs.importing import generations_import
from submissions.runs.services import RunError


class Command(BaseCommand):
    help = (
        "Import a KernelBench generations folder (level_L_problem_P_sample_S_kernel.py files) "
        "as a run of the named model; every sample is queued for evaluation."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("folder")
        parser.add_argument("--model", required=True, help="the model that wrote the kernels")
        parser.add_argument("--hardware", required=True, help="hardware slug to evaluate on")
        parser.add_argument("--backend", default="cuda")
        parser.add_argument("--precision", default="fp32")
        parser.add_argument("--name", default="", help="a name for the run")

    def handle(self, *args, **options) -> None:
        hardware = Hardware.objects.filter(slug=options["hardware"]).first()
        if hardware is None:
            known = ", ".join(Hardware.objects.values_list("slug", flat=True)) or "none"
            raise CommandError(f"No hardware {options['hardware']!r} (known: {known}).")
        try:
            report = generations_import(
                folder=Path(options["folder"]),
                model_name=options["model"],
                hardware=hardware,
                backend=options["backend"],
                precision=options["precision"],
                name=options["name"],
            )
        except RunError as error:
            allowed = f" Allowed: {', '.join(error.allowed)}." if error.allowed else ""
            raise CommandError(f"{error.message}{allowed}") from None
        for filename, why in report.skipped:
            self.stderr.write(f"skipped {filename}: {why}")
        self.stdout.write(
            f"imported {report.imported} sample(s) as run {report.run.pk} ({report.run.name}); "
            f"{len(report.skipped)} file(s) skipped; evaluations are queued on {hardware.slug}"
        )
