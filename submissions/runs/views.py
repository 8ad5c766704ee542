"""Run pages: the list of runs and one run's live progress and fast_p table."""

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_POST

from submissions.runs.models import Run
from submissions.runs.selectors import run_status_payload
from submissions.runs.services import RunError, run_resume, run_start, run_stop

ACTIONS = {"start": run_start, "stop": run_stop, "resume": run_resume}


def run_list(request):
    runs = Run.objects.select_related("model", "hardware")[:200]
    return render(request, "runs/list.html", {"runs": runs})


def _leaderboard_url(run: Run) -> str | None:
    try:
        return reverse("leaderboard_run", args=[run.pk])
    except NoReverseMatch:  # the leaderboard's run page is optional here
        return None


def run_detail(request, pk: int):
    run = get_object_or_404(Run.objects.select_related("model", "hardware", "created_by"), pk=pk)
    state = run_status_payload(run, page=request.GET.get("page"))
    fast_p_columns = [key for key in (state["fast_p"][0] if state["fast_p"] else {}) if
                      key.startswith("fast_")]
    fast_p_rows = [
        {**row, "values": [row[key] for key in fast_p_columns]} for row in state["fast_p"]
    ]
    return render(
        request,
        "runs/detail.html",
        {
            "run": run,
            "state": state,
            "fast_p_columns": fast_p_columns,
            "fast_p_rows": fast_p_rows,
            "fast_p_kernelbench_rows": [
                {**row, "values": [row[key] for key in fast_p_columns]}
                for row in state["fast_p_kernelbench"]
            ],
            "countings": state["countings"],
            "leaderboard_url": _leaderboard_url(run),
            "actions": _allowed_actions(run) if request.user.is_staff else [],
        },
    )


def _allowed_actions(run: Run) -> list[str]:
    return {
        Run.Status.PENDING: ["start", "stop"],
        Run.Status.RUNNING: ["stop"],
        Run.Status.STOPPED: ["resume"],
    }.get(run.status, [])


def run_status(request, pk: int):
    """What the run page polls for its live counters and tables."""
    run = get_object_or_404(Run.objects.select_related("model", "hardware"), pk=pk)
    return JsonResponse(run_status_payload(run, page=request.GET.get("page")))


@require_POST
@staff_member_required
def run_action(request, pk: int, action: str):
    if action not in ACTIONS:
        raise Http404(f"no action {action!r}")
    run = get_object_or_404(Run, pk=pk)
    try:
        ACTIONS[action](run=run)
    except RunError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Run {run.pk}: {action} done.")
    return redirect("run_detail", pk=run.pk)
