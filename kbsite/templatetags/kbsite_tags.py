import math
import re

from django import template
from django.utils.html import json_script
from django.utils.safestring import mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from evaluator import backends

register = template.Library()

# Stored values (verdicts, statuses, backends) as people read them. Anything not listed reads
# with its underscores as spaces: "compile_error" -> "compile error".
LABELS = {
    **backends.LABELS,
    "fp32": "fp32",
    "fp16": "fp16",
    "bf16": "bf16",
}


def human_label(value) -> str:
    """A stored slug as a label: "compile_error" -> "compile error", "cuda" -> "CUDA"."""
    if value is None:
        return ""
    text = str(value)
    return LABELS.get(text.lower(), text.replace("_", " "))


@register.filter
def human(value) -> str:
    return human_label(value)


# Nothing is compiled for a plain PyTorch kernel: the judge's "compiling" step only loads it.
# static/kbsite/live.js says the same while the page is live (label_table below).
UNCOMPILED_BACKENDS = tuple(b.name for b in backends.BACKENDS.values() if not b.compiles)


@register.simple_tag
def label_table():
    """The labels and the backends that compile nothing, for static/kbsite/labels.js: the
    page's scripts read them from here instead of keeping a copy."""
    return json_script({"labels": LABELS, "uncompiled": list(UNCOMPILED_BACKENDS)},
                       "kb-labels")


@register.filter
def phase_label(phase, backend: str = "") -> str:
    """A running evaluation's phase in words, for the submission's backend."""
    if phase == "compiling" and backend in UNCOMPILED_BACKENDS:
        return "loading"
    return human_label(phase)


# Where a traceback points into the submitted file (the harness runs it as candidate.py).
CANDIDATE_LINE = re.compile(r'candidate\.py", line (\d+)')


def failing_line(traceback_text) -> int | None:
    """The last line of the submitted file that a traceback names, or None."""
    found = CANDIDATE_LINE.findall(str(traceback_text or ""))
    return int(found[-1]) if found else None


@register.filter
def highlight_python(source: str, traceback_text: str = "") -> str:
    """The code highlighted, with line numbers; the line a traceback names is marked."""
    lines = (source or "").count("\n") + 1
    line = failing_line(traceback_text)
    formatter = HtmlFormatter(
        cssclass="highlight",
        linenos="inline",
        hl_lines=[line] if line and line <= lines else [],
    )
    # Pygments escapes the code itself, so the markup it returns is safe to render.
    return mark_safe(highlight(source or "", PythonLexer(), formatter))


def _number(value) -> float | None:
    """A stored figure as a number; None for a missing or unreadable one (shown as a dash)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


@register.filter
def ms(value) -> str:
    number = _number(value)
    return "–" if number is None else f"{number:.4g} ms"


@register.filter
def times(value) -> str:
    number = _number(value)
    return "–" if number is None else f"{number:.2f}×"


def seconds_label(seconds: float) -> str:
    """A duration as people say it: "0.4 s", "27 s", "3 min 05 s", "2 h 04 min"."""
    seconds = max(0.0, float(seconds))
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


register.filter("seconds", seconds_label)


@register.filter
def elapsed(item) -> str:
    """How long something with started_at and finished_at took; "" when either is missing."""
    start, end = getattr(item, "started_at", None), getattr(item, "finished_at", None)
    if not start or not end:
        return ""
    return seconds_label((end - start).total_seconds())


@register.filter
def diff(value) -> str:
    """A numeric difference to 3 significant digits (not 18): 0.0123456789 -> "0.0123"."""
    if value is None or value == "":
        return "–"
    try:
        return f"{float(value):.3g}"
    except (TypeError, ValueError):
        return str(value)
