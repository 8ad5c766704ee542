"""`python manage.py curation_export --hardware SLUG [--level N ...] [--output FILE]`.

Writes what was curated on a hardware (each problem's latest validation and measured baselines of
its current reference) as JSON, for `curation_import` on another site or to resume there.
"""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.models import Hardware
from problems.curation import curation_export


class Command(BaseCommand):
    help = (
        "Write a hardware's validations and measured baselines of the problems' current "
        "references as a JSON curation file (stdout unless --output)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--hardware", required=True, help="hardware slug, e.g. h200")
        parser.add_argument(
            "--level", type=int, action="append", default=[], help="only this level (repeatable)"
        )
        parser.add_argument("--output", help="write to this file instead of stdout")

    def handle(self, *args, **options) -> None:
        hardware = Hardware.objects.filter(slug=options["hardware"]).first()
        if hardware is None:
            raise CommandError(f"no hardware {options['hardware']!r}")
        data = curation_export(hardware=hardware, levels=options["level"] or None)
        # Indented with sorted keys, so two exports of a run diff line by line.
        text = json.dumps(data, indent=1, sort_keys=True)
        if not options["output"]:
            self.stdout.write(text)
            return
        path = Path(options["output"])
        try:
            path.write_text(text + "\n", encoding="utf-8")
        except OSError as error:
            raise CommandError(f"{path}: cannot write it ({error})") from None
        problems = data["problems"]
        validations = sum(entry["validation"] is not None for entry in problems)
        baselines = sum(len(entry["baselines"]) for entry in problems)
        self.stdout.write(
            f"wrote {len(problems)} problems ({validations} validations, {baselines} baselines) "
            f"on {hardware.slug} to {path}"
        )
