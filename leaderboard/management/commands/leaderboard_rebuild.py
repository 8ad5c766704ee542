from django.core.management.base import BaseCommand

from leaderboard.services import boards_rebuild


class Command(BaseCommand):
    help = "Recompute every best entry, rank and record from the stored evaluations."

    def handle(self, *args, **options) -> None:
        written = boards_rebuild()
        self.stdout.write(f"{written} best entries written")
