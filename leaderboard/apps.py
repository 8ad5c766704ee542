from django.apps import AppConfig
from django.db.models.signals import post_save


def _problem_saved(sender, instance, update_fields=None, **kwargs) -> None:
    # Whether a problem counts in the tables is its status (published or not), and which of
    # its boards counts is its precision (the main board's). A save that names its fields and
    # neither of these (an import's new description) changes nothing here.
    if update_fields is not None and not {"status", "precision"} & set(update_fields):
        return
    from leaderboard.services import summaries_refresh_for_problem

    summaries_refresh_for_problem(problem=instance)


class LeaderboardConfig(AppConfig):
    name = "leaderboard"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The participant summaries (ParticipantSummary) count only published problems, and a
        # problem's status changes in the problems app (publish, hold, retire: model methods,
        # the admin's form), which sits below the leaderboard and may not call it: it hears of
        # them through this signal instead. (A problem with submissions is never deleted.)
        from problems.models import Problem

        post_save.connect(_problem_saved, sender=Problem, dispatch_uid="leaderboard-problem-saved")
