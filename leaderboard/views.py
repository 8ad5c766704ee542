from django.shortcuts import get_object_or_404, render

from evaluation.models import Hardware
from leaderboard.services import board_rows
from problems.models import Problem


def problem_board(request, level: int, number: int, hardware: str):
    problem = get_object_or_404(Problem, level=level, number=number)
    hardware = get_object_or_404(Hardware, slug=hardware)
    return render(
        request,
        "leaderboard/problem_board.html",
        {
            "problem": problem,
            "hardware": hardware,
            "rows": board_rows(problem=problem, hardware=hardware),
            "all_hardware": Hardware.objects.all(),
        },
    )
