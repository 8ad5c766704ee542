from django.contrib import admin

from submissions.models import ApiToken, Generation, Model, Run, Submission
from submissions.run_admin import RUN_ACTIONS


@admin.register(Model)
class ModelAdmin(admin.ModelAdmin):
    list_display = ["litellm_name", "display_name", "active", "created_at"]
    search_fields = ["litellm_name", "display_name"]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["name", "model", "hardware", "backend", "status", "created_at"]
    list_filter = ["status", "model", "hardware"]
    filter_horizontal = ["problems"]
    actions = RUN_ACTIONS


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = [
        "id", "problem", "user", "model", "backend", "hardware", "status", "verdict", "created_at"
    ]
    list_filter = ["status", "verdict", "backend", "hardware"]
    search_fields = ["id", "problem__slug", "user__username", "source_hash"]
    raw_id_fields = ["user", "problem", "problem_version", "run"]


@admin.register(Generation)
class GenerationAdmin(admin.ModelAdmin):
    list_display = ["run", "problem", "sample_index", "turn", "status", "cost_usd"]
    list_filter = ["status", "run"]
    raw_id_fields = ["submission", "problem"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "user", "name", "scopes", "created_at", "revoked_at"]
    readonly_fields = ["key_hash", "prefix"]
