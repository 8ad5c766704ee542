from django.core.management.base import BaseCommand

from leaderboard.services import boards_rebuild
from submissions.runs.samples import run_samples_rebuild


class Command(BaseCommand):
    help = (
        "Recompute every best entry, rank, record and the boards' and participants' summaries, "
        "and every run's samples, from the stored evaluations."
    )

    def handle(self, *args, **options) -> None:
        written = boards_rebuild()
        self.stdout.write(f"{written} best entries written")
        # A run's tables are kept beside the boards (submissions.RunSample), from the same
        # evaluations: in doubt together.
        samples = run_samples_rebuild()
        self.stdout.write(f"{samples} run samples written")
