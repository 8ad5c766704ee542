from django.contrib import admin

from evaluation.models import Baseline, Evaluation, Hardware, Runner, Validation


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


@admin.register(Baseline)
class BaselineAdmin(admin.ModelAdmin):
    list_display = ["problem", "hardware", "mode", "median_ms", "torch_version", "created_at"]
    list_filter = ["hardware", "mode"]
    search_fields = ["problem__slug"]


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


@admin.register(Validation)
class ValidationAdmin(admin.ModelAdmin):
    list_display = ["problem_version", "hardware", "status", "created_at"]
    list_filter = ["status", "hardware"]
    raw_id_fields = ["problem_version"]
