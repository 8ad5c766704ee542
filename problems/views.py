from django.db.models import Q
from django.shortcuts import get_object_or_404, render

from evaluation.models import Hardware
from problems.models import Problem


def problem_list(request):
    problems = Problem.objects.exclude(status=Problem.Status.RETIRED)
    level = request.GET.get("level")
    if level and level.isdigit():
        problems = problems.filter(level=int(level))
    text = request.GET.get("q", "").strip()
    if text:
        problems = problems.filter(Q(name__icontains=text) | Q(slug__icontains=text))
    return render(
        request,
        "problems/list.html",
        {"problems": problems, "level": level or "", "q": text},
    )


def problem_detail(request, level: int, number: int):
    problem = get_object_or_404(
        Problem.objects.select_related("current_version"), level=level, number=number
    )
    return render(
        request,
        "problems/detail.html",
        {
            "problem": problem,
            "hardware": Hardware.objects.all(),
            "baselines": problem.baselines.select_related("hardware"),
        },
    )
