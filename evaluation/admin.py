from django.contrib import admin

from evaluation.models import Hardware, Runner


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
