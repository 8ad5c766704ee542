"""`python manage.py import_kernelbench PATH [--level N] [--publish] [--tag NAME]`."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from problems.importing import ImportSourceError
from problems.services import problems_import


class Command(BaseCommand):
    help = (
        "Import KernelBench problems as drafts from a problem folder (level1/ ... level4/, "
        "files <number>_<Name>.py) or from the Hugging Face dataset's files (parquet or JSON "
        "lines with columns code, level, name, problem_id). Files are read, never run. "
        "Importing the same files again changes nothing; a changed reference becomes a new "
        "version."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", help="KernelBench folder, a levelN folder, or dataset file(s)")
        parser.add_argument(
            "--level", type=int, action="append", default=[], help="only this level (repeatable)"
        )
        parser.add_argument(
            "--publish",
            action="store_true",
            help="publish what is imported (problems with validation findings stay unpublished)",
        )
        parser.add_argument(
            "--tag", action="append", default=[], help="tag every imported problem (repeatable)"
        )

    def handle(self, *args, **options) -> None:
        try:
            report = problems_import(
                path=Path(options["path"]),
                levels=options["level"],
                publish=options["publish"],
                tags=options["tag"],
            )
        except ImportSourceError as error:
            raise CommandError(str(error)) from None
        for label, reason in report.skipped:
            self.stderr.write(f"skipped {label}: {reason}")
        for slug in report.publish_refused:
            self.stderr.write(f"not published {slug}: its latest validation has findings")
        self.stdout.write(
            f"{report.imported} problems: {len(report.created)} new, "
            f"{len(report.new_versions)} new versions, {len(report.unchanged)} unchanged, "
            f"{len(report.published)} published, {len(report.skipped)} skipped"
        )
        if not report.imported and report.skipped:
            raise CommandError("nothing could be imported")
