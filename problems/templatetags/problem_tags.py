"""Links to a problem's pages name it by its slug (problems.selectors)."""

from django import template
from django.urls import reverse

from problems.models import Problem
from problems.selectors import problem_url_args

register = template.Library()


@register.simple_tag
def problem_url(view: str, problem: Problem | dict, *args) -> str:
    """The URL of `view` (a route taking `level<int:level>/<str:name>/`, then `args`) for a
    Problem or a row naming one (its slug as "problem" or "slug", its "level" and "number"):
    `{% problem_url 'problem_board' problem hw.slug %}` -> /leaderboard/level1/19_ReLU/h200/."""
    return reverse(view, args=[*problem_url_args(problem), *args])


@register.simple_tag
def starter_choices(problems) -> list[dict]:
    """A form's problems as its starter picker's script reads them (static/kbsite/
    starter-picker.js): each one's slug (the picker's value), pk (the form's value) and the API
    URL of its starter."""
    return [
        {
            "slug": problem.slug,
            "pk": str(problem.pk),
            "starter": problem_url("api_problem_starter", problem),
        }
        for problem in problems
    ]
