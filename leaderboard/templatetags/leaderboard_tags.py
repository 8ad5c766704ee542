from django import template

from evaluation import scoring
from leaderboard import selectors

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
    top of its board there: the first TOP_RESULTS rows ("top"), how many more ("more") and the
    reference time its speedups are against ("board_reference_ms", as the board says it). A
    section with no baseline, validation or ranked kernel is left out."""
    shown = []
    for section in sections:
        rows = selectors.board_rows(problem=problem, hardware=section["hardware"])
        curated = section.get("eager") or section.get("compile") or section.get("validation")
        if not (rows or curated):
            continue
        shown.append(
            {
                **section,
                "top": rows[:TOP_RESULTS],
                "more": max(len(rows) - TOP_RESULTS, 0),
                # The ranked rows' references: what selectors.board_reference reads, no query.
                "board_reference_ms": scoring.board_reference_ms(r["reference_ms"] for r in rows),
            }
        )
    return shown
