"""The shape of a wrong output's error, found before any guess at its cause.

`find(expected, got, atol=, rtol=)` looks at where the elements outside the tolerance lie and
how their values relate to the expected ones, and says it in words an author can act on:

- where: confined to some rows, columns or indices of a dimension (their index ranges: the
  last column, the first row, a tail block, both edges), to the border of the last two
  dimensions (a convolution's halo), to every p-th index of a dimension, or spread out;
- what: NaN/inf, zeros where the reference is not, the expected times a factor (a scale, or
  -1: a sign), the expected plus a constant, the expected transposed or shifted by an index.

It returns a dict: `kind`, `sentence` (plain words, with the likely kind of bug), `count` of
`elements` wrong and their `fraction`, and the facts behind the sentence (`ranges`, `border`,
`factor`, `offset`, `shift`, `period`, `values`). `fits_precision` is true only for small
errors spread over the output with no pattern: only then is a precision hint worth giving
(diagnose.py asks for the reference's lower-precision recomputation only then). A ReLU wrong
only in its last column used to be told "Maybe a precision issue": with one column of many
wrong, its mean error was about as small as a lower precision's rounding.

Plain torch, on whatever device the outputs are: the judge's CPU or GPU tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

# Elements per step of the pass over the outputs. KernelBench's outputs reach gigabytes on a
# GPU: one chunk at a time keeps the extra memory to a few chunk-sized temporaries (the
# difference, a mask, the wrong elements' indices and coordinates: under 100 MB, seen on the
# CPU) whatever the output's size.
CHUNK = 1 << 20
# Wrong elements kept to test how the values relate (a scale, an offset, a shifted or
# transposed layout). Counts and positions are exact (every element is looked at, a chunk at a
# time); the relations are tested on this sample, spread over the output: one that holds for
# thousands of wrong elements is no chance, and testing them all would need gathers the size
# of the output.
SAMPLE = 4096
# Wrong elements are counted per index of each dimension; a dimension longer than this (a
# flattened output of a billion elements) is counted per bucket of consecutive indices instead,
# so the counts stay a few MB: its ranges are then given to the bucket (still holding every
# wrong value), and no period is looked for along it.
MAX_INDEX = 1 << 20
HOLDS = 0.95  # the share of the sampled wrong elements a relation must explain
RELATED = 16  # fewer wrong elements than this fit a relation by chance (4 zeros fit a shift)
SHIFTS = (1, -1, 2, -2)  # index shifts tried along each dimension
HALO = 3  # a border at most this deep is a halo
PERIODS = range(2, 17)  # every p-th index of a dimension
SMALL_ERROR = 0.05  # rounding-like: the largest error within this share of the largest value


@dataclass
class Scan:
    """What one pass over the outputs finds: exact counts and positions, a sample."""

    shape: tuple[int, ...]
    count: int = 0  # elements outside the tolerance
    nan: int = 0
    inf: int = 0
    zeros: int = 0  # wrong elements that are exactly 0
    max_error: float = 0.0  # the largest finite |got - expected| among them
    max_expected: float = 0.0  # the largest finite |expected|
    hits: list[torch.Tensor] = field(default_factory=list)  # per dimension, wrong per index
    widths: list[int] = field(default_factory=list)  # per dimension, indices per count of hits
    border: int = -1  # the deepest wrong element's distance from an edge of the last two dims
    sample: list[torch.Tensor] = field(default_factory=list)  # flat indices of wrong elements


def _coords(flat: torch.Tensor, shape: tuple[int, ...]) -> list[torch.Tensor]:
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat = flat // size
    return list(reversed(out))


def _scan(expected: torch.Tensor, got: torch.Tensor, atol: float, rtol: float) -> Scan:
    shape, device = tuple(expected.shape), expected.device
    widths = [math.ceil(size / MAX_INDEX) for size in shape]
    scan = Scan(shape, widths=widths, hits=[
        torch.zeros(math.ceil(size / w), dtype=torch.int64, device=device)
        for size, w in zip(shape, widths, strict=True)])
    # Running counts and maxima stay on the device: one synchronisation a chunk (nonzero's).
    counts = torch.zeros(3, dtype=torch.int64, device=device)  # NaN, inf, 0 among the wrong
    maxima = torch.tensor([0.0, 0.0, -1.0], dtype=torch.float64, device=device)  # see Scan
    e_flat, g_flat = expected.reshape(-1), got.reshape(-1).to(device)
    floating = expected.is_floating_point()
    work = torch.promote_types(expected.dtype, torch.float32) if floating else torch.float64
    total = e_flat.numel()
    quota = max(64, SAMPLE // math.ceil(total / CHUNK))  # the sample spread over every chunk
    for start in range(0, total, CHUNK):
        e, g = e_flat[start:start + CHUNK].to(work), g_flat[start:start + CHUNK].to(work)
        diff = (g - e).abs()
        largest = e.abs().nan_to_num(nan=0.0, posinf=0.0).max()
        maxima[1] = torch.maximum(maxima[1], largest.double())
        # NaN compares false: a NaN is outside any tolerance.
        wrong = ~(diff <= atol + rtol * e.abs()) if floating else g != e
        local = torch.nonzero(wrong).reshape(-1)
        if local.numel() == 0:
            continue
        scan.count += local.numel()
        bad = g[local]
        counts += torch.stack([torch.isnan(bad).sum(), torch.isinf(bad).sum(),
                               (bad == 0).sum()])
        error = diff[local].nan_to_num(nan=0.0, posinf=0.0).max()
        maxima[0] = torch.maximum(maxima[0], error.double())
        flat = local + start
        coords = _coords(flat, shape)
        for d, c in enumerate(coords):
            scan.hits[d] += torch.bincount(c // widths[d], minlength=scan.hits[d].numel())
        if len(shape) >= 2:
            i, j = coords[-2], coords[-1]
            depth = torch.minimum(torch.minimum(i, shape[-2] - 1 - i),
                                  torch.minimum(j, shape[-1] - 1 - j))
            maxima[2] = torch.maximum(maxima[2], depth.max().double())
        step = max(1, math.ceil(flat.numel() / quota))
        scan.sample.append(flat[::step].clone())  # a copy: a view would keep all of `flat`
    scan.nan, scan.inf, scan.zeros = counts.tolist()
    scan.max_error, scan.max_expected, border = maxima.tolist()
    scan.border = int(border)
    return scan


# --- where the wrong elements are ---------------------------------------------------------

def _runs(indices: list[int]) -> list[list[int]]:
    """Sorted indices as [first, last] runs of consecutive ones."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return runs


def _confined(scan: Scan, hits: list[torch.Tensor]) -> list[dict[str, Any]]:
    """The dimensions whose wrong elements lie in at most half their indices, in one run or
    in two runs at both ends: [{dim, ranges}] (index ranges, [first, last])."""
    out = []
    for d, h in enumerate(hits):
        buckets, width, size = h.numel(), scan.widths[d], scan.shape[d]
        indices = torch.nonzero(h).reshape(-1).tolist()
        if buckets < 2 or len(indices) > buckets // 2:
            continue
        runs = _runs(indices)
        if len(runs) == 1 or (len(runs) == 2 and runs[0][0] == 0
                              and runs[1][1] == buckets - 1):
            ranges = [[a * width, min((b + 1) * width, size) - 1] for a, b in runs]
            out.append({"dim": d, "ranges": ranges})
    return out


def _period(scan: Scan, hits: list[torch.Tensor]) -> dict[str, int] | None:
    """A dimension whose wrong elements lie only at every p-th index (at least 3 of them):
    p is the greatest common divisor of their distances."""
    for d in reversed(range(len(hits))):
        indices = torch.nonzero(hits[d]).reshape(-1).tolist()
        if len(indices) < 3 or scan.widths[d] > 1:
            continue
        p = math.gcd(*(i - indices[0] for i in indices[1:]))
        if p in PERIODS:
            return {"dim": d, "every": p, "at": indices[0] % p}
    return None


def _ordinal(n: int) -> str:
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _words(d: int, ndim: int) -> tuple[str, str, str]:
    """One index, several, and how to name the dimension, for dimension d."""
    if ndim == 1:
        return "position", "positions", ""
    if d == ndim - 1:
        return "column", "columns", ""
    if d == ndim - 2:
        return "row", "rows", ""
    return "index", "indices", f" of dimension {d}"


def _range_words(d: int, ndim: int, runs: list[list[int]], size: int) -> str:
    one, many, of = _words(d, ndim)
    if len(runs) == 2:
        (_, a), (b, _) = runs
        first = one if a == 0 else f"{a + 1} {many}"
        last = one if b == size - 1 else f"{size - b} {many}"
        return (f"the first {first} and the last {last}{of} "
                f"({_span(runs[0])} and {_span(runs[1])})")
    a, b = runs[0]
    if a == b:
        if a == size - 1:
            return f"the last {one}{of}, {a}"
        if a == 0:
            return f"the first {one}{of}, 0"
        return f"{one} {a}{of}"
    if b == size - 1:
        return f"the last {b - a + 1} {many}{of}, {a}-{b}"
    if a == 0:
        return f"the first {b + 1} {many}{of}, 0-{b}"
    return f"{many} {a}-{b}{of}"


def _span(run: list[int]) -> str:
    return str(run[0]) if run[0] == run[1] else f"{run[0]}-{run[1]}"


def _place(confined: list[dict[str, Any]], shape: tuple[int, ...]) -> str:
    """Which end of their dimensions the confined ranges touch: tail, head, edges, block."""
    ends = set()
    for c in confined:
        runs, size = c["ranges"], shape[c["dim"]]
        if runs[0][0] == 0:
            ends.add("head")
        if runs[-1][1] == size - 1:
            ends.add("tail")
    if ends == {"head", "tail"}:
        return "edges"
    return ends.pop() if ends else "block"


CAUSES = {
    "tail": "a boundary or tail bug (the last block, or a bound or mask off by one?)",
    "head": "a bug at the start (the first block, or an index off by one?)",
    "edges": "an edge bug (padding, or a halo?)",
    "block": "a bug in one block of indices (a tile's offset or bounds?)",
    "halo": "a halo or padding bug (the input's border, or a tile's halo?)",
    "strided": "a stride or vector-width bug",
    "nan": "look for a division by zero, an overflow (exp without subtracting the max?), "
           "log or sqrt of a negative, or an uninitialised value",
    "zeros": "elements never written (a grid too small, an early return, a mask too wide?)",
    "scale": "a scale factor missing or applied twice (1/sqrt(d), 1/N, a mean for a sum?)",
    "sign": "a subtraction the wrong way round, or a negation too many?",
    "offset": "a constant added or missing (a bias applied twice, or not at all?)",
    "transposed": "a swapped index or stride: write element (i, j) at (i, j), not (j, i)",
    "column_major": "the output was written column-major: write it row-major (contiguous)",
    "shifted": "an off-by-one index (a load or a store offset by one?)",
    "spread": "no pattern in their positions or values",
    "rounding": "small errors spread over the output, as rounding gives",
}


def _where(scan: Scan, hits: list[torch.Tensor]) -> dict[str, Any] | None:
    """Where the wrong elements are, when that has a shape: {kind, words, facts...}."""
    shape, ndim = scan.shape, len(scan.shape)
    confined = _confined(scan, hits)
    if confined:
        words = " and ".join(_range_words(c["dim"], ndim, c["ranges"], shape[c["dim"]])
                             for c in confined)
        return {"kind": _place(confined, shape), "words": f"in {words}", "ranges": confined}
    height, width = shape[-2:] if ndim >= 2 else (0, 0)
    depth = scan.border + 1
    if 0 < depth <= HALO and min(height, width) > 2 * depth:
        return {"kind": "halo", "border": depth, "words": (
            f"on the border of the {height}x{width} planes of the last two dimensions (the "
            f"outermost {_count(depth, 'row')} and {_count(depth, 'column')}), none inside")}
    period = _period(scan, hits)
    if period:
        one, _, of = _words(period["dim"], ndim)
        p, at = period["every"], period["at"]
        return {"kind": "strided", "period": period, "words": (
            f"in every {_ordinal(p)} {one}{of} only ({at}, {at + p}, {at + 2 * p}, ...)")}
    return None


# --- how their values relate --------------------------------------------------------------

def _held(got: torch.Tensor, predicted: torch.Tensor, atol: float, rtol: float) -> bool:
    """Whether `predicted` gives `got` within the tolerance for HOLDS of the elements."""
    if got.numel() == 0:
        return False
    ok = (got - predicted).abs() <= atol + rtol * predicted.abs()
    return float(ok.double().mean()) >= HOLDS


def _layout(expected: torch.Tensor, got: torch.Tensor, sample: torch.Tensor, atol: float,
            rtol: float) -> dict[str, Any] | None:
    """The expected values in the wrong places: transposed (or written column-major) in the
    last two dimensions, or shifted by an index or two along one dimension."""
    shape, e_flat = tuple(expected.shape), expected.reshape(-1)
    g = got.reshape(-1).to(expected.device)[sample].double()
    if len(shape) >= 2 and min(shape[-2:]) > 1:
        height, width = shape[-2:]
        plane = height * width
        within = sample % plane
        # Row-major (height, width) read as if written (width, height): element (r, c) of the
        # expected sits at c * height + r of the plane.
        source = sample - within + (within % height) * width + within // height
        if _held(g, e_flat[source].double(), atol, rtol):
            return {"kind": "transposed" if height == width else "column_major"}
    stride = 1
    for d in reversed(range(len(shape))):
        size = shape[d]
        index = (sample // stride) % size
        for k in SHIFTS if size > 2 else ():
            valid = (index - k >= 0) & (index - k < size)
            # Enough of the sample away from the edge the shift runs off.
            if int(valid.sum()) * 2 < sample.numel():
                continue
            source = sample[valid] - k * stride
            if _held(g[valid], e_flat[source].double(), atol, rtol):
                return {"kind": "shifted", "shift": {"dim": d, "by": k}}
        stride *= size
    return None


def _values(scan: Scan, expected: torch.Tensor, got: torch.Tensor, sample: torch.Tensor,
            atol: float, rtol: float) -> dict[str, Any] | None:
    """What the wrong values are: NaN/inf, zeros, or the expected scaled or offset."""
    n, bad = scan.count, scan.nan + scan.inf
    if bad * 2 >= n:  # mostly NaN/inf: the first thing to fix, whatever the rest
        name = "nan" if not scan.inf else ("inf" if not scan.nan else "nonfinite")
        return {"values": name, "nonfinite_count": bad}
    if scan.zeros == n:
        return {"values": "zeros"}
    if sample.numel() < RELATED:
        return None
    e = expected.reshape(-1)[sample].double()
    g = got.reshape(-1).to(expected.device)[sample].double()
    finite = torch.isfinite(e) & torch.isfinite(g)
    usable = finite & (e != 0)
    if int(usable.sum()) * 2 >= sample.numel():
        factor = float((g[usable] / e[usable]).median())
        if factor != 0 and _held(g, factor * e, atol, rtol):
            if abs(factor + 1) <= 1e-3:
                return {"values": "sign"}
            return {"values": "scale", "factor": _num(factor)}
    if int(finite.sum()) * 2 >= sample.numel():
        offset = float((g - e)[finite].median())
        if _held(g, e + offset, atol, rtol):
            return {"values": "offset", "offset": _num(offset)}
    return None


VALUE_WORDS = {
    "nan": "NaN", "inf": "inf", "nonfinite": "NaN or inf",
    "zeros": "0 where the reference is not",
    "sign": "the expected with the sign flipped",
}


def _value_words(values: dict[str, Any]) -> str:
    kind = values["values"]
    if kind == "scale":
        return f"the expected times {values['factor']:g}"
    if kind == "offset":
        return f"the expected plus {values['offset']:g}"
    return VALUE_WORDS[kind]


# --- the sentence ---------------------------------------------------------------------------

def _num(x: float) -> float:
    return float(f"{x:.4g}")


def _share(n: int, total: int) -> str:
    return f"{n} of {total} values wrong, {100 * n / total:.3g}%"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _of(n: int, total: int, nouns: str) -> str:
    return f"all {total} {nouns}" if n == total else f"{n} of the {total} {nouns}"


def _all(n: int) -> str:
    return "the only wrong value is" if n == 1 else f"all {n} wrong values are"


def _sample(scan: Scan) -> torch.Tensor:
    sample = torch.cat(scan.sample)
    if sample.numel() > SAMPLE:  # evenly spread over what the chunks kept
        keep = torch.linspace(0, sample.numel() - 1, SAMPLE, device=sample.device).long()
        sample = sample[keep]
    return sample


def _spread_words(scan: Scan, hits: list[torch.Tensor]) -> str:
    shape = scan.shape
    n, total = scan.count, math.prod(shape)
    text = f"{n} of {total} values are wrong ({100 * n / total:.3g}%)"
    if len(shape) >= 2 and scan.widths[-2] == scan.widths[-1] == 1:
        rows, cols = (int((hits[d] > 0).sum()) for d in (-2, -1))
        text += f", in {_of(rows, shape[-2], 'rows')} and {_of(cols, shape[-1], 'columns')}"
    if scan.max_expected > 0:
        text += (f"; the largest error is {100 * scan.max_error / scan.max_expected:.3g}% of "
                 "the largest expected value")
    if scan.nan + scan.inf:
        text += f"; {scan.nan + scan.inf} of them are NaN or inf"
    return text


def find(expected: torch.Tensor, got: torch.Tensor, *, atol: float,
         rtol: float) -> dict[str, Any] | None:
    """The shape of the error of `got` against `expected` (see the module's doc); None when
    nothing is wrong or the two cannot be compared element by element."""
    if (got.shape != expected.shape or got.dtype != expected.dtype or expected.numel() == 0
            or expected.is_complex()):
        return None
    scan = _scan(expected, got, atol, rtol)
    n, total = scan.count, expected.numel()
    if n == 0:
        return None
    hits = [h.cpu() for h in scan.hits]
    sample = _sample(scan)
    facts: dict[str, Any] = {"count": n, "elements": total, "fraction": float(f"{n / total:.4g}")}
    values = _values(scan, expected, got, sample, atol, rtol)
    layout = None
    if values is None and sample.numel() >= RELATED:
        layout = _layout(expected, got, sample, atol, rtol)
    where = _where(scan, hits) if n >= 2 and layout is None else None
    if n == 1:
        found = _single(scan, values)
    elif layout:
        found = {**layout, "fits_precision": False,
                 "sentence": _layout_sentence(layout, scan.shape, n, total)}
    elif where:
        found = _where_found(where, values, n)
    elif values:
        found = _values_found(values, n, total)
    else:
        found = _spread(scan, hits)
    sentence = found.pop("sentence")
    return {**facts, **found, "sentence": sentence[0].upper() + sentence[1:]}


def _where_found(where: dict[str, Any], values: dict[str, Any] | None, n: int) -> dict:
    kind, words = where.pop("kind"), where.pop("words")
    sentence = f"{_all(n)} {words}"
    if values:
        some = values.get("nonfinite_count", n)
        sentence += (", where they are " if values["values"] in ("scale", "offset", "sign")
                     else ", and are " if some == n else f", and {some} of them are ")
        sentence += _value_words(values)
    return {**where, **(values or {}), "kind": kind, "fits_precision": False,
            "sentence": f"{sentence}: {CAUSES[kind]}"}


def _values_found(values: dict[str, Any], n: int, total: int) -> dict:
    kind = values["values"]
    cause = CAUSES["nan" if kind in ("inf", "nonfinite") else kind]
    if kind in ("scale", "offset", "sign"):
        sentence = f"the output is {_value_words(values)} ({_share(n, total)}): {cause}"
    else:
        some = values.get("nonfinite_count", n)
        head = _all(n) if some == n else f"{some} of the {n} wrong values are"
        sentence = (f"{head} {_value_words(values)} ({100 * n / total:.3g}% of the output "
                    f"wrong): {cause}")
    return {**values, "kind": kind, "fits_precision": False, "sentence": sentence}


def _single(scan: Scan, values: dict[str, Any] | None) -> dict[str, Any]:
    """One wrong element: where it is, and whether it is NaN or 0; otherwise it may be
    rounding (the precision check tells)."""
    flat = int(_sample(scan)[0])
    where = tuple(int(c) for c in _coords(torch.tensor(flat), scan.shape))
    sentence = f"only one value is wrong, at {where}"
    if values:
        sentence += f", and it is {_value_words(values)}"
    small = not values and scan.max_error <= SMALL_ERROR * scan.max_expected
    return {**(values or {}), "kind": "single", "position": list(where),
            "fits_precision": small, "sentence": sentence}


def _spread(scan: Scan, hits: list[torch.Tensor]) -> dict[str, Any]:
    """No pattern: rounding-like (the precision check may say which) when the errors are
    finite and small next to the values."""
    small = (scan.nan + scan.inf == 0
             and scan.max_error <= SMALL_ERROR * scan.max_expected)
    kind = "rounding" if small else "spread"
    return {"kind": kind, "fits_precision": small,
            "sentence": f"{_spread_words(scan, hits)}: {CAUSES[kind]}"}


def _layout_sentence(layout: dict[str, Any], shape: tuple[int, ...], n: int,
                     total: int) -> str:
    kind = layout["kind"]
    share = _share(n, total)
    if kind == "transposed":
        return (f"the output is the expected transposed in its last two dimensions "
                f"(got[..., i, j] = expected[..., j, i]; {share}): {CAUSES[kind]}")
    if kind == "column_major":
        return (f"the output holds the expected {shape[-2]}x{shape[-1]} values in column-major "
                f"order ({share}): {CAUSES[kind]}")
    d, k = layout["shift"]["dim"], layout["shift"]["by"]
    one, many, of = _words(d, len(shape))
    direction = f"i - {k}" if k > 0 else f"i + {-k}"
    return (f"the output is the expected shifted by {k} {one if abs(k) == 1 else many}{of} "
            f"(got[i] = expected[{direction}] along dimension {d}; {share}): {CAUSES[kind]}")
