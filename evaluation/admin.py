from django.contrib import admin

from evaluation.models import AccountWeight, Hardware, Runner


@admin.register(Hardware)
class HardwareAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "kind", "arch", "gpu_count", "torch_version", "updated_at"]
    search_fields = ["slug", "name"]


@admin.register(Runner)
class RunnerAdmin(admin.ModelAdmin):
    list_display = [
        "name", "hardware", "host", "last_seen", "current_submission_id", "evaluations_done",
    ]
    list_filter = ["hardware"]


@admin.register(AccountWeight)
class AccountWeightAdmin(admin.ModelAdmin):
    """Fair share (evaluation/fairness.py): an account of weight w takes w turns per round."""

    list_display = ["user", "weight", "note", "updated_at"]
    search_fields = ["user__username", "note"]
    autocomplete_fields = ["user"]
