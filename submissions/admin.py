from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db import transaction

from submissions.cancellations import CancelError, account_disable, submission_cancel
from submissions.models import Batch, Evaluation, Reverification, Submission
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


@admin.action(description="Cancel (queued or running ones)")
def cancel_submissions(modeladmin, request, queryset) -> None:
    cancelled = 0
    for submission in queryset.filter(status__in=Submission.OPEN):
        try:
            submission_cancel(submission=submission, user=request.user)
        except CancelError as error:  # it finished meanwhile
            modeladmin.message_user(request, error.message, level=messages.WARNING)
        else:
            cancelled += 1
    modeladmin.message_user(request, f"Cancelled {cancelled} submission(s).",
                            level=messages.SUCCESS)


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = [
        "id", "problem", "user", "model", "backend", "hardware", "status", "verdict",
        "reverification", "created_at",
    ]
    list_filter = ["status", "verdict", "reverification", "backend", "hardware"]
    search_fields = ["id", "problem__slug", "user__username", "source_hash"]
    raw_id_fields = ["user", "problem", "problem_version", "run", "batch", "cancelled_by"]
    actions = [reverify_submissions, cancel_submissions]


@admin.register(Batch)
class BatchAdmin(admin.ModelAdmin):
    list_display = ["id", "user", "created_at", "cancelled_at"]
    raw_id_fields = ["user", "cancelled_by"]


# Accounts. Disabling one cancels its work, which lives in this app (accounts sits below
# submissions and cannot reach it), so the user admin with that action is registered here.
@admin.action(description="Disable the selected accounts (cancels their queued and running work)")
def disable_accounts(modeladmin, request, queryset) -> None:
    cancelled = 0
    for user in queryset.filter(is_active=True).exclude(pk=request.user.pk):
        cancelled += account_disable(user=user, by=request.user)
    modeladmin.message_user(
        request, f"Disabled the selected accounts (not your own); cancelled {cancelled} "
        "submission(s) they had waiting or running.", level=messages.SUCCESS)


class AccountAdmin(UserAdmin):
    """Django's user admin, with disabling as the operator's one step: the action, or clearing
    "active" on the form, both go through account_disable."""

    actions = [*(UserAdmin.actions or []), disable_accounts]

    def save_model(self, request, obj, form, change) -> None:
        disabling = change and "is_active" in form.changed_data and not obj.is_active
        super().save_model(request, obj, form, change)
        if disabling:
            cancelled = account_disable(user=obj, by=request.user)
            self.message_user(request, f"{obj} is disabled; {cancelled} of its submissions "
                              "waiting or running were cancelled.", level=messages.INFO)


User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, AccountAdmin)


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
