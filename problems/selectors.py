"""A problem's names, in one place: how a URL or a query names a problem, and how links name it.

A problem has one name, its slug (`level1/904_Small_Add`), and is also found by its level and
number (1, 904). Every page and API view that takes a problem resolves it here, so that each
form works everywhere:

- `level1/904_Small_Add`: the slug (routes `level<int:level>/<str:name>/`, the slug's two parts,
  so that a path after it, such as `starter/`, stays a path of its own);
- `level1/904`: the level and the number in the same route (the name is a number);
- `1/904`: the level and the number (routes `<int:level>/<int:number>/`, the older form).

Links name a problem by its slug (problems.models.url_args).
"""

import re

from django.db.models import QuerySet

from problems.models import Problem, url_args

# "1/904" or "level1/904": a level and a number written as one name (a query's ?problem=).
LEVEL_NUMBER = re.compile(r"(?:level)?(?P<level>[0-9]+)/(?P<number>[0-9]+)")


def problem_by_name(
    problems: QuerySet[Problem] | None = None,
    *,
    name: str = "",
    level: int | None = None,
    number: int | None = None,
) -> Problem | None:
    """The problem a request names, among `problems` (all of them when left out: a caller
    passes the ones its user may see, so that one it may not is not there); None when there is
    none.

    - level and number: that problem;
    - level and name (a route's `level<int:level>/<str:name>/`): the slug `level<level>/<name>`,
      else, where the name is a number, the problem of that number in the level;
    - name alone (a query's value): a slug, or a level and a number as `1/904` or `level1/904`.

    A slug is tried before a level and number, so a name that is both finds the slug's problem.
    """
    if problems is None:
        problems = Problem.objects.all()
    if level is not None and number is not None:
        return problems.filter(level=level, number=number).first()
    if not name:
        return None
    slug = f"level{level}/{name}" if level is not None else name
    found = problems.filter(slug=slug).first()
    if found is not None:
        return found
    if level is not None:
        return problems.filter(level=level, number=int(name)).first() if name.isdigit() else None
    match = LEVEL_NUMBER.fullmatch(name)
    if match is None:
        return None
    return problems.filter(level=int(match["level"]), number=int(match["number"])).first()


def problem_url_args(problem: Problem | dict) -> list:
    """url_args of a Problem, or of a row that names one as the leaderboard's rows do (the slug
    as "problem" or "slug", with "level" and "number")."""
    if isinstance(problem, Problem):
        return url_args(slug=problem.slug, level=problem.level, number=problem.number)
    slug = problem.get("slug") or problem["problem"]
    return url_args(slug=slug, level=problem["level"], number=problem["number"])


def asked_name(*, name: str = "", level: int | None = None, number: int | None = None) -> str:
    """The name a request gave, as it gave it, for a "There is no problem ..." answer."""
    if level is not None and number is not None:
        return f"{level}/{number}"
    return f"level{level}/{name}" if level is not None else name
