from django import template
from django.utils.safestring import mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

register = template.Library()


@register.filter
def highlight_python(source: str) -> str:
    # Pygments escapes the code itself, so the markup it returns is safe to render.
    return mark_safe(highlight(source or "", PythonLexer(), HtmlFormatter(cssclass="highlight")))


@register.filter
def ms(value) -> str:
    if value is None:
        return "–"
    return f"{value:.4g} ms"


@register.filter
def times(value) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}×"
