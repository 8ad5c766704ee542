"""`python manage.py curation_import FILE`: store a curation file written by `curation_export`.

All of it or nothing: a malformed file stores nothing. Problems this site lacks, or whose
reference differs from the one measured, are skipped and said so.
"""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from problems.curation import CurationFileError, curation_import


class Command(BaseCommand):
    help = (
        "Import a JSON curation file (validations and baselines measured on another site, "
        "e.g. a GPU host's own); what this site already has is kept."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="a file written by curation_export")

    def handle(self, *args, **options) -> None:
        path = Path(options["file"])
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise CommandError(f"{path}: not a readable JSON file ({error})") from None
        try:
            report = curation_import(data=data)
        except CurationFileError as error:
            raise CommandError(f"{path}: {error}") from None
        skipped = len(report.skipped)
        self.stdout.write(
            f"stored {len(report.validations)} validations, {len(report.baselines)} baselines; "
            f"skipped {skipped}{':' if skipped else ''}"
        )
        for slug, why in report.skipped:
            self.stdout.write(f"- {slug}: {why}")
