"""The admin of model runs: models, runs (create one here, then start, stop or resume it) and
their steps. Registered when submissions/admin.py imports this module.
"""

from django.contrib import admin, messages

from submissions.runs.models import Generation, Model, Run


def _apply(modeladmin, request, queryset, service_name: str, verb: str) -> None:
    # Imported here: the admin module loads in every process (runners too), and litellm, which
    # run services need, is not installed on GPU runner hosts.
    from submissions.runs import services

    service = getattr(services, service_name)
    done = 0
    for run in queryset:
        try:
            service(run=run)
        except services.RunError as error:
            modeladmin.message_user(request, error.message, level=messages.WARNING)
        else:
            done += 1
    if done:
        modeladmin.message_user(request, f"{done} run(s) {verb}.", level=messages.SUCCESS)


@admin.action(description="Start the selected runs")
def start_runs(modeladmin, request, queryset) -> None:
    _apply(modeladmin, request, queryset, "run_start", "started")


@admin.action(description="Stop the selected runs")
def stop_runs(modeladmin, request, queryset) -> None:
    _apply(modeladmin, request, queryset, "run_stop", "stopped")


@admin.action(description="Resume the selected runs (finished steps are kept)")
def resume_runs(modeladmin, request, queryset) -> None:
    _apply(modeladmin, request, queryset, "run_resume", "resumed")


RUN_ACTIONS = [start_runs, stop_runs, resume_runs]


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


@admin.register(Generation)
class GenerationAdmin(admin.ModelAdmin):
    list_display = ["run", "problem", "sample_index", "turn", "status", "cost_usd"]
    list_filter = ["status", "run"]
    raw_id_fields = ["submission", "problem"]
