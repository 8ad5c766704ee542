from django.contrib import admin, messages
from django.db import transaction

from submissions.models import Evaluation, Reverification, Submission
from submissions.reverifications import ReverificationError, reverification_request

# Model runs' admin (models, runs, their steps) is the runs room's; importing it registers it.
from submissions.runs import admin as runs_admin  # noqa: F401


@admin.action(description="Re-verify with fresh seeds")
def reverify_submissions(modeladmin, request, queryset) -> None:
    """Queue a second evaluation of each, with fresh secret seeds, on another runner if live."""
    queued = 0
    for submission in queryset:
        try:
            with transaction.atomic():  # each task is queued once its row is committed
                reverification_request(
                    submission=submission,
                    reason=Reverification.Reason.ADMIN,
                    requested_by=request.user,
                )
        except ReverificationError as error:
            modeladmin.message_user(request, error.message, level=messages.WARNING)
        else:
            queued += 1
    if queued:
        modeladmin.message_user(
            request, f"Queued {queued} re-verification(s).", level=messages.SUCCESS
        )


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = [
        "id", "problem", "user", "model", "backend", "hardware", "status", "verdict",
        "reverification", "created_at",
    ]
    list_filter = ["status", "verdict", "reverification", "backend", "hardware"]
    search_fields = ["id", "problem__slug", "user__username", "source_hash"]
    raw_id_fields = ["user", "problem", "problem_version", "run"]
    actions = [reverify_submissions]


@admin.register(Reverification)
class ReverificationAdmin(admin.ModelAdmin):
    """Read-only: re-verifications are queued by the action on submissions (and by owners of
    held results) and run by runners."""

    list_display = [
        "id", "submission", "reason", "status", "avoid_runner", "claimed_by", "created_at",
        "finished_at",
    ]
    list_filter = ["status", "reason"]
    raw_id_fields = ["submission", "checked_evaluation", "disputed_evaluation", "evaluation",
                     "requested_by"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = [
        "id", "submission", "hardware", "verdict", "candidate_median_ms", "speedup", "finished_at",
    ]
    list_filter = ["verdict", "hardware", "purpose"]
    search_fields = ["submission__id", "source_hash"]
    raw_id_fields = ["submission", "problem_version"]

    # Only runners write evaluations; admins read them (and re-verify through actions).
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
