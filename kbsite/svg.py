"""Small server-rendered SVG charts: fast_p against p, a record's progress, a histogram.

Every text that reaches the markup goes through escape(), so the result is safe to render. A
chart with nothing to show is the empty string, so that pages leave its box out
(`{% if chart %}`), and a title never ends in a dangling separator ("fast_p, " when the scope is
empty reads "fast_p").
"""

import math
from collections.abc import Sequence
from datetime import datetime

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 640, 320
LEFT, RIGHT, TOP, BOTTOM = 56, 170, 28, 44  # the right margin holds the legend
COLORS = (
    "#2456c7",
    "#d1495b",
    "#2a9d8f",
    "#e9a23b",
    "#6a4c93",
    "#3d405b",
    "#8ab17d",
    "#c05299",
    "#4d908e",
    "#f3722c",
)


def _fmt(value: float) -> str:
    return f"{value:.1f}"


def clean_title(title: str) -> str:
    """The title without a trailing separator or blank: "fast_p, " -> "fast_p"."""
    return title.strip().rstrip(",;:·-–").strip()


TITLE_CHARS = 80  # what fits across the chart; the whole title stays in <title>


def _shown(title: str) -> str:
    return title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"


def _frame(title: str, body: list[str], *, x_label: str, y_label: str) -> SafeString:
    title = clean_title(title)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}" '
        'font-family="system-ui, sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fff" '
        'stroke="#d9dee5"/>',
        f'<text x="{LEFT}" y="{TOP - 10}" font-weight="600">{escape(_shown(title))}</text>',
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 8}" text-anchor="middle">'
        f"{escape(x_label)}</text>",
        f'<text x="14" y="{TOP + plot_h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {TOP + plot_h / 2:.1f})">{escape(y_label)}</text>',
        *body,
        "</svg>",
    ]
    return mark_safe("".join(parts))


def _empty(title: str, message: str) -> SafeString:
    """Nothing to draw: no chart at all (the page says so in its table)."""
    return mark_safe("")


class _Scale:
    def __init__(self, lo: float, hi: float, a: float, b: float, *, log: bool = False) -> None:
        if hi <= lo:
            hi = lo + 1.0
        self.log = log
        self.lo, self.hi = (math.log10(lo), math.log10(hi)) if log else (lo, hi)
        self.a, self.b = a, b

    def __call__(self, value: float) -> float:
        v = math.log10(value) if self.log else value
        return self.a + (v - self.lo) / (self.hi - self.lo) * (self.b - self.a)


def _y_axis(scale: _Scale, ticks: Sequence[tuple[float, str]]) -> list[str]:
    parts = []
    for value, label in ticks:
        y = scale(value)
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{_fmt(y)}" y2="{_fmt(y)}" '
            'stroke="#eef1f6"/>'
            f'<text x="{LEFT - 6}" y="{_fmt(y + 4)}" text-anchor="end">{escape(label)}</text>'
        )
    return parts


def _x_axis(scale: _Scale, ticks: Sequence[tuple[float, str]]) -> list[str]:
    base = HEIGHT - BOTTOM
    return [
        f'<line x1="{_fmt(scale(v))}" x2="{_fmt(scale(v))}" y1="{base}" y2="{base + 4}" '
        f'stroke="#5b6573"/><text x="{_fmt(scale(v))}" y="{base + 16}" text-anchor="middle">'
        f"{escape(label)}</text>"
        for v, label in ticks
    ]


def _legend(names: Sequence[str]) -> list[str]:
    parts = []
    for i, name in enumerate(names[:14]):
        y = TOP + 8 + i * 18
        color = COLORS[i % len(COLORS)]
        short = name if len(name) <= 22 else name[:21] + "…"
        parts.append(
            f'<rect x="{WIDTH - RIGHT + 12}" y="{y - 8}" width="10" height="10" fill="{color}"/>'
            f'<text x="{WIDTH - RIGHT + 28}" y="{y + 1}">{escape(short)}</text>'
        )
    return parts


def fast_p_chart(
    series: Sequence[tuple[str, dict[float, float]]], *, title: str = "fast_p against p"
) -> SafeString:
    """One line per model: the share of the level's problems faster than p, for each p."""
    series = [(name, points) for name, points in series if points]
    if not series:
        return _empty(title, "No model results yet.")
    ps = sorted({p for _, points in series for p in points})
    x = _Scale(ps[0], ps[-1], LEFT + 10, WIDTH - RIGHT - 10)
    y = _Scale(0.0, 1.0, HEIGHT - BOTTOM, TOP)
    body = _y_axis(y, [(v / 4, f"{v * 25}%") for v in range(5)])
    body += _x_axis(x, [(p, f"{p:g}") for p in ps])
    for i, (name, points) in enumerate(series):
        color = COLORS[i % len(COLORS)]
        coords = " ".join(f"{_fmt(x(p))},{_fmt(y(points[p]))}" for p in sorted(points))
        body.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}">'
            f"<title>{escape(name)}</title></polyline>"
        )
        body += [
            f'<circle cx="{_fmt(x(p))}" cy="{_fmt(y(v))}" r="3" fill="{color}">'
            f"<title>{escape(name)}: fast_{p:g} = {v:.1%}</title></circle>"
            for p, v in sorted(points.items())
        ]
    body += _legend([name for name, _ in series])
    return _frame(title, body, x_label="speedup threshold p", y_label="fast_p")


def _time_ticks(start: datetime, end: datetime) -> list[tuple[float, str]]:
    t0, t1 = start.timestamp(), end.timestamp()
    span = t1 - t0
    fmt = "%H:%M:%S" if span < 3600 else "%H:%M" if span < 2 * 86400 else "%Y-%m-%d"
    return [
        (t, datetime.fromtimestamp(t, tz=start.tzinfo).strftime(fmt))
        for t in (t0 + (t1 - t0) * i / 4 for i in range(5))
    ]


def record_chart(
    points: Sequence[tuple[datetime, float, str]],
    *,
    now: datetime,
    title: str = "Record over time",
) -> SafeString:
    """The board's fastest median time as a step line, one marker per new record."""
    if not points:
        return _empty(title, "No record yet.")
    start = points[0][0]
    end = max(now, points[-1][0])
    if end <= start:
        end = start.fromtimestamp(start.timestamp() + 60, tz=start.tzinfo)
    values = [ms for _, ms, _ in points]
    lo, hi = min(values), max(values)
    log = lo > 0 and hi / lo > 10
    pad = (hi - lo) * 0.1 or hi * 0.1 or 1.0
    y = (
        _Scale(lo / 1.5, hi * 1.5, HEIGHT - BOTTOM, TOP, log=True)
        if log
        else _Scale(max(0.0, lo - pad), hi + pad, HEIGHT - BOTTOM, TOP)
    )
    x = _Scale(start.timestamp(), end.timestamp(), LEFT + 10, WIDTH - RIGHT - 10)
    y_ticks = [y.lo + (y.hi - y.lo) * i / 4 for i in range(5)]
    body = _y_axis(y, [(10**t if log else t, f"{(10**t if log else t):.3g}") for t in y_ticks])
    body += _x_axis(x, _time_ticks(start, end))
    path = []
    for i, (when, ms, _) in enumerate(points):
        px, py = x(when.timestamp()), y(ms)
        if i:
            path.append(f"H{_fmt(px)}V{_fmt(py)}")
        else:
            path.append(f"M{_fmt(px)},{_fmt(py)}")
    path.append(f"H{_fmt(x(end.timestamp()))}")
    body.append(f'<path d="{"".join(path)}" fill="none" stroke="{COLORS[0]}" stroke-width="2"/>')
    body += [
        f'<circle cx="{_fmt(x(when.timestamp()))}" cy="{_fmt(y(ms))}" r="3.5" fill="{COLORS[1]}">'
        f"<title>{escape(who)}: {ms:.4g} ms on {when:%Y-%m-%d %H:%M}</title></circle>"
        for when, ms, who in points
    ]
    return _frame(title, body, x_label="date", y_label="median (ms)" + (", log" if log else ""))


SPEEDUP_EDGES = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0, 4.0, math.inf)


def histogram_chart(
    counts: Sequence[int], *, edges: Sequence[float] = SPEEDUP_EDGES, title: str = "Speedups"
) -> SafeString:
    """Bars per speedup bin [a, b)."""
    if not any(counts):
        return _empty(title, "No correct kernels yet.")
    labels = [
        f"≥{a:g}" if b == math.inf else f"{a:g}–{b:g}"
        for a, b in zip(edges, edges[1:], strict=False)
    ]
    n = len(counts)
    plot_w = WIDTH - LEFT - RIGHT
    top = max(counts)
    y = _Scale(0, top * 1.1, HEIGHT - BOTTOM, TOP)
    step = max(1, math.ceil(top / 4))
    body = _y_axis(y, [(v, str(v)) for v in range(0, top + 1, step)])
    bar_w = plot_w / n
    for i, (count, label) in enumerate(zip(counts, labels, strict=True)):
        bx = LEFT + i * bar_w
        by = y(count)
        body.append(
            f'<rect x="{_fmt(bx + 4)}" y="{_fmt(by)}" width="{_fmt(bar_w - 8)}" '
            f'height="{_fmt(HEIGHT - BOTTOM - by)}" fill="{COLORS[0]}">'
            f"<title>{escape(label)}: {count}</title></rect>"
            f'<text x="{_fmt(bx + bar_w / 2)}" y="{HEIGHT - BOTTOM + 16}" '
            f'text-anchor="middle">{escape(label)}</text>'
        )
    return _frame(title, body, x_label="speedup (×)", y_label="problems")


def _decades(lo: float, hi: float) -> list[tuple[float, str]]:
    """Log-axis ticks at the powers of ten between lo and hi."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return [(10.0**e, f"1e{e}" if abs(e) > 3 else f"{10.0**e:g}") for e in range(first, last + 1)]


def roofline_chart(
    points: Sequence[tuple[str, float, float, int]],
    *,
    series: Sequence[str],
    peak_flops: float,
    peak_bytes_per_s: float,
    title: str = "Roofline",
) -> SafeString:
    """The hardware's roofs (bandwidth × intensity up to the peak rate) and one marker per
    point: (label, arithmetic intensity in FLOP/byte, achieved FLOP/s, index into `series`,
    which names the legend's entries and picks the color)."""
    points = [p for p in points if p[1] > 0 and p[2] > 0]
    if not points or peak_flops <= 0 or peak_bytes_per_s <= 0:
        return _empty(title, "Nothing to place: no bytes and FLOPs known.")
    ridge = peak_flops / peak_bytes_per_s
    x_lo = min([p[1] for p in points] + [ridge]) / 10
    x_hi = max([p[1] for p in points] + [ridge]) * 10
    y_hi = peak_flops * 3
    y_lo = min([p[2] for p in points] + [peak_bytes_per_s * x_lo]) / 3
    x = _Scale(x_lo, x_hi, LEFT + 10, WIDTH - RIGHT - 10, log=True)
    y = _Scale(y_lo, y_hi, HEIGHT - BOTTOM, TOP, log=True)
    body = _y_axis(y, _decades(y_lo, y_hi)[::2])
    body += _x_axis(x, _decades(x_lo, x_hi)[::2])
    roof = (
        f"M{_fmt(x(x_lo))},{_fmt(y(peak_bytes_per_s * x_lo))}"
        f"L{_fmt(x(ridge))},{_fmt(y(peak_flops))}L{_fmt(x(x_hi))},{_fmt(y(peak_flops))}"
    )
    body.append(
        f'<path d="{roof}" fill="none" stroke="#5b6573" stroke-width="2">'
        f"<title>roof: {peak_bytes_per_s / 1e9:.0f} GB/s, {peak_flops / 1e12:.0f} TFLOP/s"
        "</title></path>"
    )
    # The first series (the submitted kernel) last and as a ring, so that a point it shares
    # with the reference's stays visible.
    for label, intensity, rate, index in sorted(points, key=lambda p: p[3] == 0):
        color = COLORS[index % len(COLORS)]
        style = (f'r="6.5" fill="none" stroke="{color}" stroke-width="2.5"' if index == 0
                 else f'r="4.5" fill="{color}"')
        body.append(
            f'<circle cx="{_fmt(x(intensity))}" cy="{_fmt(y(rate))}" {style}>'
            f"<title>{escape(label)}: {intensity:.3g} FLOP/byte, {rate / 1e12:.3g} TFLOP/s"
            "</title></circle>"
        )
    body += _legend(list(series))
    return _frame(title, body, x_label="arithmetic intensity (FLOP/byte, log)",
                  y_label="FLOP/s (log)")
