from django.core.management.base import BaseCommand

from problems.services import samples_load


class Command(BaseCommand):
    help = "Load kbsite's small sample problems (published), for a fresh site."

    def handle(self, *args, **options) -> None:
        outcomes = samples_load()
        created = sum(outcome.created for outcome in outcomes)
        self.stdout.write(f"{len(outcomes)} sample problems ({created} new)")
