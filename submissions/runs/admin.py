"""Admin actions for runs: create a run in the admin, then start, stop or resume it here.

Hooked into RunAdmin in submissions/admin.py with `actions = RUN_ACTIONS`.
"""

from django.contrib import admin, messages


def _apply(modeladmin, request, queryset, service_name: str, verb: str) -> None:
    # Imported here: the admin module loads in every process (runners too), and litellm, which
    # run services need, is not installed on GPU runner hosts.
    from submissions import runs

    service = getattr(runs, service_name)
    done = 0
    for run in queryset:
        try:
            service(run=run)
        except runs.RunError as error:
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
