from django import template
from django.urls import reverse

from evaluation import scoring
from leaderboard import selectors
from problems.selectors import problem_url_args

register = template.Library()


@register.filter
def pct(value) -> str:
    if value is None:
        return "–"
    return f"{value * 100:.1f}%"


@register.filter
def ratio(value) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}"


@register.filter
def day(value) -> str:
    """An ISO date-time string (as rows carry them) as its date; a dash when there is none."""
    return str(value)[:10] if value else "–"


@register.filter
def minute(value) -> str:
    """An ISO date-time string as "YYYY-MM-DD HH:MM" (UTC, as stored)."""
    return str(value)[:16].replace("T", " ") if value else "–"


@register.simple_tag
def board_url(problem, hardware, precision: str = "", main_board: bool = True) -> str:
    """A board's page, naming the problem by its slug: the problem's main board at its plain
    path, another precision's board at .../<precision>/. `problem` is a Problem, or a row (rows
    carry the slug as "problem", level, number, hardware and selectors.board_fields)."""
    args = [*problem_url_args(problem), hardware]
    if main_board or not precision:
        return reverse("problem_board", args=args)
    return reverse("problem_board_precision", args=[*args, precision])


# ---- the boards on the problems' own pages ------------------------------------------------------
# The problems app sits below the leaderboard and imports none of it: its pages name these tags,
# and the boards are read here.

TOP_RESULTS = 5


@register.simple_tag(takes_context=True)
def with_board_status(context, rows: list[dict]) -> list[dict]:
    """The problems list's rows (each with its "problem"), each given how many people have a
    kernel ranked on one of its boards ("solvers") and the viewer's own status ("mine": solved,
    tried or not tried). Two queries for the page."""
    ids = [row["problem"].pk for row in rows]
    solvers = selectors.problem_solvers(problem_ids=ids)
    mine = selectors.problem_status_for(user=context.get("user"), problem_ids=ids)
    return [
        {
            **row,
            "solvers": solvers.get(row["problem"].pk, 0),
            "mine": mine.get(row["problem"].pk, "not tried"),
        }
        for row in rows
    ]


@register.simple_tag
def with_top_results(problem, sections: list[dict]) -> list[dict]:
    """A problem page's sections, one a hardware (its baselines and validation), each given the
    top of its main board there (the problem's own precision): the first TOP_RESULTS rows
    ("top"), how many more ("more") and the reference time its speedups are against
    ("board_reference_ms", as the board says it); and its boards there ("boards",
    selectors.problem_boards: the main one, then those of other precisions, labelled). A
    section with no baseline, validation or board is left out."""
    shown = []
    for section in sections:
        rows = selectors.board_rows(problem=problem, hardware=section["hardware"])
        boards = selectors.problem_boards(problem=problem, hardware=section["hardware"])
        curated = section.get("eager") or section.get("compile") or section.get("validation")
        if not (rows or curated or len(boards) > 1):
            continue
        shown.append(
            {
                **section,
                "boards": boards,
                "top": rows[:TOP_RESULTS],
                "more": max(len(rows) - TOP_RESULTS, 0),
                # The ranked rows' references: what selectors.board_reference reads, no query.
                "board_reference_ms": scoring.board_reference_ms(r["reference_ms"] for r in rows),
            }
        )
    return shown
