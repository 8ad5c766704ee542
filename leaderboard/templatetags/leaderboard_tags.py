from django import template

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
