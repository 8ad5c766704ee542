"""Public problem pages: the list by level with search, and each problem with its reference,
baselines, validation state and top results."""

from django.db.models import Prefetch, Q
from django.shortcuts import get_object_or_404, render

from evaluation.models import Hardware
from leaderboard.services import board_rows
from problems.models import Problem, Validation

TOP_RESULTS = 5
LISTED = (Problem.Status.PUBLISHED,)


def _latest_finished(validations) -> Validation | None:
    finished = [v for v in validations if v.is_finished]
    return max(finished, key=lambda v: v.finished_at) if finished else None


def problem_list(request):
    problems = Problem.objects.select_related("current_version").prefetch_related(
        "tags",
        Prefetch(
            "current_version__validations",
            queryset=Validation.objects.filter(status__in=Validation.FINISHED).select_related(
                "hardware"
            ),
        ),
    )
    show_retired = request.GET.get("retired") == "1"
    statuses = [*LISTED, Problem.Status.RETIRED] if show_retired else list(LISTED)
    status = request.GET.get("status", "")
    if request.user.is_staff and status in Problem.Status.values:
        statuses = [status]  # curators can look at drafts here too
    problems = problems.visible_to(request.user).filter(status__in=statuses)
    level = request.GET.get("level", "")
    if level.isdigit():
        problems = problems.filter(level=int(level))
    text = request.GET.get("q", "").strip()
    if text:
        problems = problems.filter(
            Q(name__icontains=text)
            | Q(slug__icontains=text)
            | Q(description__icontains=text)
            | Q(tags__name__iexact=text)
        ).distinct()
    rows = [
        {
            "problem": problem,
            "validation": _latest_finished(problem.current_version.validations.all())
            if problem.current_version
            else None,
        }
        for problem in problems
    ]
    return render(
        request,
        "problems/list.html",
        {
            "rows": rows,
            "levels": Problem.objects.visible_to(request.user)
            .filter(status__in=statuses)
            .values_list("level", flat=True)
            .distinct()
            .order_by("level"),
            "level": level,
            "q": text,
            "show_retired": show_retired,
            "status": status if request.user.is_staff else "",
            "statuses": Problem.Status.values if request.user.is_staff else [],
        },
    )


def problem_detail(request, level: int, number: int):
    # Drafts and held problems are under curation: not there for anyone but staff.
    problem = get_object_or_404(
        Problem.objects.visible_to(request.user)
        .select_related("current_version")
        .prefetch_related("tags"),
        level=level,
        number=number,
    )
    all_hardware = list(Hardware.objects.all())
    baselines = {}
    for baseline in problem.baselines.select_related("hardware"):
        baselines.setdefault(baseline.hardware_id, {})[baseline.mode] = baseline
    validations: dict[int, Validation] = {}
    if problem.current_version_id:
        for validation in problem.current_version.validations.select_related("hardware").order_by(
            "-created_at"
        ):
            validations.setdefault(validation.hardware_id, validation)
    per_hardware = []
    for hardware in all_hardware:
        rows = board_rows(problem=problem, hardware=hardware)
        entry = {
            "hardware": hardware,
            "eager": baselines.get(hardware.pk, {}).get("eager"),
            "compile": baselines.get(hardware.pk, {}).get("compile"),
            "validation": validations.get(hardware.pk),
            "top": rows[:TOP_RESULTS],
            "more": max(len(rows) - TOP_RESULTS, 0),
        }
        if entry["eager"] or entry["compile"] or entry["validation"] or rows:
            per_hardware.append(entry)
    code_visible = problem.reference_visible_to(request.user)
    return render(
        request,
        "problems/detail.html",
        {
            "problem": problem,
            "hardware": all_hardware,
            "per_hardware": per_hardware,
            "code_visible": code_visible,
            "versions": problem.versions.only("version", "source_hash", "created_at"),
        },
    )
