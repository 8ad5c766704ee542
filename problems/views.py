"""Public problem pages: the list by level with search, and each problem with its reference,
baselines, validation state and top results."""

from django.core.paginator import Paginator
from django.db.models import Count, Prefetch, Q
from django.http import Http404
from django.shortcuts import render

from evaluation.models import Hardware
from problems.difficulty import difficulty, level_medians
from problems.models import Baseline, Problem, Validation
from problems.selectors import asked_name, problem_by_name

LISTED = (Problem.Status.PUBLISHED,)
PER_PAGE = 50


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
    page = Paginator(problems.order_by("level", "number"), PER_PAGE).get_page(
        request.GET.get("page")
    )
    # Who solved each problem, and the viewer's own status, come from the boards: the template
    # adds them (leaderboard_tags.with_board_status), as this app imports no leaderboard module.
    baseline_ms, medians = _eager_baselines([problem.pk for problem in page])
    rows = [
        {
            "problem": problem,
            "validation": _latest_finished(problem.current_version.validations.all())
            if problem.current_version
            else None,
            "difficulty": difficulty(
                level=problem.level,
                baseline_ms=baseline_ms.get(problem.pk),
                level_median_ms=medians.get(problem.level),
            ),
        }
        for problem in page
    ]
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "problems/list.html",
        {
            "rows": rows,
            "page": page,
            "query": query.urlencode(),
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


def _eager_baselines(problem_ids: list[int]) -> tuple[dict[int, float], dict[int, float]]:
    """The eager baselines that grade difficulty (problems.difficulty): on the hardware that
    measured the most problems, each listed problem's, and each level's median over all."""
    eager = Baseline.objects.filter(mode=Baseline.Mode.EAGER, problem__status__in=Problem.LISTED)
    busiest = (
        eager.values("hardware_id").annotate(n=Count("id")).order_by("-n", "hardware_id").first()
    )
    if busiest is None:
        return {}, {}
    measured = list(
        eager.filter(hardware_id=busiest["hardware_id"]).values_list(
            "problem_id", "problem__level", "median_ms"
        )
    )
    ids = set(problem_ids)
    mine = {problem_id: ms for problem_id, _, ms in measured if problem_id in ids}
    return mine, level_medians([(level, ms) for _, level, ms in measured])


def problem_detail(request, level: int, name: str = "", number: int | None = None):
    """A problem's page, by slug (level<level>/<name>/) or by level and number (both routes
    serve it, so that links made before slugs keep working)."""
    # Drafts and held problems are under curation: not there for anyone but staff.
    problem = problem_by_name(
        Problem.objects.visible_to(request.user)
        .select_related("current_version")
        .prefetch_related("tags"),
        level=level,
        name=name,
        number=number,
    )
    if problem is None:
        raise Http404(f"There is no problem {asked_name(level=level, name=name, number=number)}.")
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
    # A section a hardware; the template adds the top of each board there and leaves out the
    # hardware with nothing to show (leaderboard_tags.with_top_results).
    per_hardware = [
        {
            "hardware": hardware,
            "eager": baselines.get(hardware.pk, {}).get("eager"),
            "compile": baselines.get(hardware.pk, {}).get("compile"),
            "validation": validations.get(hardware.pk),
        }
        for hardware in all_hardware
    ]
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
