"""What a failed correctness trial tells the kernel's author: a small JSON dict, stored with the
trial (`trial["diagnosis"]`), shown on the submission page, in the API and in model runs'
feedback.

`diagnose(expected, got, atol=, rtol=, reference_recompute=)` finds the first output that does
not match and says why, in terms an author can act on:

- `pattern`: the shape of the error, found first (error_shape.py): where the wrong elements
  are (rows, columns, a tail block, a halo) and how their values relate (NaN, zeros, a scale,
  an offset, a transposed or shifted layout), as a sentence and facts;
- `worst`: up to five elements furthest outside the tolerance (flat index, position, expected,
  got, abs diff), with the count of elements outside it;
- `nonfinite`: NaN and inf counts of the output and the positions of the first ones (and of the
  reference's, when it made them);
- a wrong shape explained: transposed (the expected shape reversed, `.T` holding the values),
  other dimensions permuted, the right values reshaped, size-1 dimensions added or dropped, a
  shape that broadcasts with the expected one;
- a wrong dtype explained, with whether the values would pass after a cast;
- `precision`: when an fp32 output's values are off, how far the reference itself lands when
  recomputed in lower precision (`reference_recompute(name)` gives those outputs; see
  `recomputer`), and `hint` when the candidate's error matches one: TF32 (matmul inputs rounded
  to 10 mantissa bits, fp32 accumulation), fp16/bf16 inputs, fp16/bf16 arithmetic. Only
  when the pattern fits rounding (small errors spread out, `fits_precision`): an error confined
  to a column is a bug whatever its size.

A precision variant matches when the candidate's output is much nearer the recomputation than
the reference (`distance` at most half the candidate's error: the same rounding; then the hint
says "The error is consistent with ..."), or, more weakly, when the two errors have the same
size (mean abs error within a factor MATCH_FACTOR: perhaps the same kind of rounding done
another way, perhaps a bug of that size; the hint says "Maybe a precision issue"). Seen on an
H200 (torch 2.11, Triton 3.6), 2048x4096 @ 4096x2048 fp32: Triton's default `tl.dot` matched
`tf32_truncated` with the same rounding (mean error ratio 1.01 on randn inputs, 1.04 on rand,
where its max abs diff was 0.75), cuBLAS with `allow_tf32` matched `tf32`, fp16 operands `fp16`,
`input_precision="ieee"` passed; a kernel off by a factor 1.001 matched only by size. The
recomputation is expensive (the reference runs again per variant), so the judge asks for it
only for a failed trial, and `recomputer` skips problems too large for the precision check.

TF32: on a GPU the reference runs again with `torch.backends.cuda.matmul.allow_tf32` and
`torch.backends.cudnn.allow_tf32` on (what cuBLAS and cuDNN really do). On the CPU, which has no
TF32, it is emulated: the operands of every matmul and convolution (not their bias) are rounded
to TF32's 10 mantissa bits, round to nearest even, and the arithmetic stays fp32, which is what
TF32 tensor cores do. `tf32_truncated` (both devices, emulated) drops the 13 low bits instead of
rounding, as tensor cores fed fp32 registers without a conversion do (Triton's `tl.dot` in its
default "tf32" precision does, as seen above). Both lead to the same hint.
"""

from __future__ import annotations

import copy
import itertools
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from evaluator.judge import error_shape
from evaluator.judge.compare import _flatten

WORST = 5  # elements listed
POSITIONS = 5  # NaN/inf positions listed
MATCH_FACTOR = 2.0  # the candidate's error within this factor of a recomputation's
_CHUNK = 1 << 24

TF32_HINT = ('consistent with TF32 accumulation: pass input_precision="ieee" to tl.dot or '
             "disable TF32 (torch.backends.cuda.matmul.allow_tf32 = False, "
             "torch.backends.cudnn.allow_tf32 = False)")
_HALF_INPUTS = ("consistent with {name} inputs and fp32 accumulation: keep the inputs and "
                "weights in float32 (no .half()/.to({dtype}) casts before the matmul; in Triton "
                'tl.dot on float32 operands with input_precision="ieee")')
_HALF_ACCUMULATION = ("consistent with {name} accumulation: accumulate in float32 (in Triton "
                      "tl.zeros(..., dtype=tl.float32) accumulators and float32 operands; in "
                      "CUDA a float accumulator) and return float32")
HINTS = {
    "tf32": TF32_HINT,
    "tf32_truncated": TF32_HINT,
    "fp16_inputs": _HALF_INPUTS.format(name="fp16", dtype="torch.float16"),
    "bf16_inputs": _HALF_INPUTS.format(name="bf16", dtype="torch.bfloat16"),
    "fp16": _HALF_ACCUMULATION.format(name="fp16"),
    "bf16": _HALF_ACCUMULATION.format(name="bf16"),
}
# Tried in this order; TF32 first: with fp32 accumulation, fp16 inputs round to the same 10
# mantissa bits, and TF32 is by far the commoner cause (tl.dot's default).
VARIANTS = tuple(HINTS)


def _num(x: Any) -> float | int | str:
    """A JSON-safe number (NaN and inf as strings: JSON and Postgres refuse them)."""
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, int):
        return x
    if isinstance(x, complex):
        return str(x)
    x = float(x)
    if math.isfinite(x):
        return float(f"{x:.7g}")
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _position(flat: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for size in reversed(shape):
        out.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return list(reversed(out))


def _floating(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _passes(expected: torch.Tensor, got: torch.Tensor, atol: float, rtol: float) -> bool:
    if got.shape != expected.shape:
        return False
    got = got.to(device=expected.device, dtype=expected.dtype)
    if not _floating(expected):
        return bool(torch.equal(got, expected))
    work = torch.promote_types(expected.dtype, torch.float32)
    e, a = expected.to(work), got.to(work)
    if not bool(torch.isfinite(a).all()):
        return False
    return bool(((a - e).abs() <= atol + rtol * e.abs()).all())


def _chunks(t: torch.Tensor) -> Iterator[tuple[int, torch.Tensor]]:
    flat = t.reshape(-1)
    for start in range(0, flat.numel(), _CHUNK):
        yield start, flat[start:start + _CHUNK]


def worst_elements(expected: torch.Tensor, got: torch.Tensor, *, atol: float, rtol: float,
                   n: int = WORST) -> dict[str, Any]:
    """The elements furthest outside atol + rtol * |expected| (NaN and inf first), and how many
    are outside it. Two tensors of one shape."""
    shape = tuple(expected.shape)
    e_flat = expected.reshape(-1)
    g_flat = got.reshape(-1).to(device=expected.device)
    floating = _floating(expected)
    work = torch.promote_types(expected.dtype, torch.float32) if floating else torch.float64
    best_excess: list[torch.Tensor] = []
    best_index: list[torch.Tensor] = []
    outside = 0
    for start, e in _chunks(e_flat):
        a = g_flat[start:start + e.numel()]
        if floating:
            e_w, a_w = e.to(work), a.to(work)
            diff = (a_w - e_w).abs()
            allowed = atol + rtol * e_w.abs()
            if diff.is_complex():
                diff, allowed = diff.real, allowed.real
            excess = torch.where(torch.isfinite(a_w) & torch.isfinite(e_w), diff - allowed,
                                 torch.full_like(diff, math.inf))
            excess = excess.float() if excess.dtype != torch.float64 else excess
        else:
            excess = (a.long() - e.long()).abs().double()
            excess = torch.where(excess > 0, excess, torch.full_like(excess, -math.inf))
        outside += int((excess > 0).sum())
        k = min(n, excess.numel())
        values, index = torch.topk(excess.double(), k)
        best_excess.append(values)
        best_index.append(index + start)
    result: dict[str, Any] = {"outside_tolerance": outside, "elements": e_flat.numel(),
                              "worst": []}
    if not best_excess:
        return result
    values = torch.cat(best_excess)
    index = torch.cat(best_index)
    order = torch.argsort(values, descending=True, stable=True)[:n]
    for i in order.tolist():
        if not float(values[i]) > 0:
            break
        flat = int(index[i])
        e_val, g_val = e_flat[flat].item(), g_flat[flat].item()
        entry = {"index": flat, "position": _position(flat, shape), "expected": _num(e_val),
                 "got": _num(g_val)}
        if not isinstance(e_val, complex) and not isinstance(g_val, complex):
            entry["abs_diff"] = _num(abs(float(g_val) - float(e_val)))
        result["worst"].append(entry)
    return result


def nonfinite(t: torch.Tensor, n: int = POSITIONS) -> dict[str, Any] | None:
    """Counts of NaN, +inf and -inf and the positions of the first few; None when there are
    none (or the tensor is not floating point)."""
    if not _floating(t):
        return None
    shape = tuple(t.shape)
    counts = {"nan": 0, "posinf": 0, "neginf": 0}
    first: list[dict[str, Any]] = []
    for start, c in _chunks(t):
        if c.is_complex():
            c = torch.view_as_real(c).abs().amax(-1)
        nan, pos, neg = torch.isnan(c), torch.isposinf(c), torch.isneginf(c)
        counts["nan"] += int(nan.sum())
        counts["posinf"] += int(pos.sum())
        counts["neginf"] += int(neg.sum())
        if len(first) < n:
            bad = torch.nonzero(nan | pos | neg).reshape(-1)[: n - len(first)]
            for i in bad.tolist():
                flat = start + i
                first.append({"index": flat, "position": _position(flat, shape),
                              "value": _num(c[i].item())})
    if not any(counts.values()):
        return None
    return {**counts, "first": first}


def _describe_nonfinite(report: dict[str, Any]) -> str:
    parts = [f"{report[k]} {label}" for k, label in (("nan", "NaN"), ("posinf", "+inf"),
                                                    ("neginf", "-inf")) if report[k]]
    where = ", ".join(str(tuple(p["position"])) for p in report["first"])
    return f"{' and '.join(parts)} in the output (first at {where})"


# --- shapes and dtypes ---------------------------------------------------------------------

def explain_shape(expected: torch.Tensor, got: torch.Tensor, *, atol: float,
                  rtol: float) -> dict[str, Any]:
    """Why a shape differs, when it can be told: {kind, hint, values_match?}."""
    es, gs = tuple(expected.shape), tuple(got.shape)
    out: dict[str, Any] = {"expected_shape": list(es), "got_shape": list(gs)}
    same_count = math.prod(es) == math.prod(gs)

    def matches(candidate: torch.Tensor) -> bool:
        try:
            return _passes(expected, candidate, atol, rtol)
        except Exception:
            return False

    if same_count and len(es) == len(gs) >= 2 and sorted(es) == sorted(gs):
        if gs == es[::-1]:
            values = matches(got.permute(*reversed(range(got.dim()))))
            out.update(kind="transposed", values_match=values, hint=(
                f"the output's shape {gs} is the expected {es} transposed"
                + (": its transpose holds the expected values, so write element (i, j) at "
                   "(i, j), not (j, i) (a swapped index or stride)" if values else
                   ": check the order of the output's dimensions")))
            return out
        if len(gs) <= 5:
            for perm in itertools.permutations(range(len(gs))):
                if tuple(gs[p] for p in perm) == es and matches(got.permute(*perm)):
                    out.update(kind="permuted", values_match=True, permutation=list(perm),
                               hint=f"the output holds the expected values with its dimensions "
                                    f"permuted: got.permute{tuple(perm)} matches; write the "
                                    f"output in the shape {es}")
                    return out
    if same_count:
        values = matches(got.reshape(es))
        squeezed = [s for s in gs if s != 1] == [s for s in es if s != 1]
        if squeezed:
            out.update(kind="size_one_dims", values_match=values, hint=(
                f"the output's shape {gs} differs from the expected {es} only in size-1 "
                "dimensions (keepdim, squeeze or unsqueeze)"
                + ("; its values match once reshaped" if values else "")))
            return out
        if values:
            out.update(kind="reshaped", values_match=True,
                       hint=f"the output holds the expected values in the shape {gs}: "
                            f"return it as {es} (.view/.reshape)")
            return out
    try:
        common = tuple(torch.broadcast_shapes(es, gs))
    except RuntimeError:
        common = None
    if common is not None:
        out["kind"] = "broadcast"
        if common == es:
            values = matches(got.expand(es))
            out["values_match"] = values
            out["hint"] = (f"the output's shape {gs} broadcasts to the expected {es}: a "
                           "dimension was left at size 1 (a broadcast or a reduction too many?)"
                           + ("; broadcast to the full shape its values match" if values
                              else ""))
        elif common == gs:
            out["hint"] = (f"the expected shape {es} broadcasts to the output's {gs}: the "
                           "output was broadcast where the reference keeps fewer elements (a "
                           "reduction missing, or an operand broadcast by mistake?)")
        else:
            out["hint"] = (f"the output's shape {gs} and the expected {es} broadcast together "
                           f"(to {common}) but differ: an operand was broadcast along the wrong "
                           "dimension")
        return out
    out.update(kind="shape", hint=f"the output's shape is {gs}, expected {es}")
    return out


def explain_dtype(expected: torch.Tensor, got: torch.Tensor, *, atol: float,
                  rtol: float) -> dict[str, Any]:
    e, g = str(expected.dtype).replace("torch.", ""), str(got.dtype).replace("torch.", "")
    try:
        values = _passes(expected, got, atol, rtol)
    except Exception:
        values = False
    hint = (f"the output is {g}, expected {e}: return a {e} tensor (allocate it like the "
            f"reference's, e.g. torch.empty_like(x) on a {e} input, or .to(torch.{e}))")
    if values:
        hint += "; its values pass once cast"
    elif got.is_floating_point() and got.element_size() < expected.element_size():
        hint += "; its values differ even once cast: compute in the reference's precision too"
    return {"kind": "dtype", "expected_dtype": e, "got_dtype": g, "values_match": values,
            "hint": hint}


# --- precision -----------------------------------------------------------------------------

def _mean_abs(a: torch.Tensor, b: torch.Tensor) -> float | None:
    total = 0.0
    b_flat = b.reshape(-1).to(device=a.device)
    for start, c in _chunks(a):
        d = (b_flat[start:start + c.numel()].double() - c.double()).abs()
        s = float(d.sum())
        if not math.isfinite(s):
            return None
        total += s
    return total / a.numel() if a.numel() else None


def precision_match(expected: torch.Tensor, got: torch.Tensor,
                    recomputed: torch.Tensor) -> dict[str, Any] | None:
    """How the candidate's error compares with a recomputation's; None when they cannot be
    compared. `matches` says whether the error is consistent with that recomputation."""
    if (not isinstance(recomputed, torch.Tensor) or recomputed.shape != expected.shape
            or not recomputed.is_floating_point()):
        return None
    recomputed = recomputed.to(dtype=expected.dtype)
    candidate = _mean_abs(expected, got)
    error = _mean_abs(expected, recomputed)
    distance = _mean_abs(recomputed, got)
    if candidate is None or error is None or distance is None:
        return None
    report: dict[str, Any] = {"error": _num(error), "distance": _num(distance)}
    if error <= 0 or candidate <= 0:
        report["matches"] = False
        return report
    ratio = candidate / error
    report["ratio"] = _num(ratio)
    same = distance <= 0.5 * candidate
    report["same_rounding"] = same
    report["matches"] = same or 1 / MATCH_FACTOR <= ratio <= MATCH_FACTOR
    return report


def _choose(precision: dict[str, dict]) -> str | None:
    matched = [n for n in VARIANTS if (precision.get(n) or {}).get("matches")]
    if not matched:
        return None
    same = [n for n in matched if precision[n].get("same_rounding")]
    pool = same or matched
    if "fp16_inputs" in pool and ("tf32" in pool or "tf32_truncated" in pool):
        pool.remove("fp16_inputs")  # the same 10 mantissa bits: TF32 is the likelier cause

    def distance(name: str) -> float:
        ratio = precision[name].get("ratio")
        return abs(math.log(ratio)) if isinstance(ratio, float) and ratio > 0 else math.inf

    return min(pool, key=lambda n: (distance(n), VARIANTS.index(n)))


# --- the whole diagnosis ---------------------------------------------------------------------

def diagnose(expected: Any, got: Any, *, atol: float, rtol: float,
             reference_recompute: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """The diagnosis of the first output of `got` that does not match `expected` (a dict,
    JSON-safe; {} when everything matches). `reference_recompute(name)` returns the
    reference's outputs recomputed as the variant `name` (VARIANTS), or raises; it is called
    only for an fp32 output whose values are off."""
    exp_list, got_list = _flatten(expected), _flatten(got)
    if len(exp_list) != len(got_list):
        return {"kind": "outputs", "hint": (
            f"expected {len(exp_list)} outputs, got {len(got_list)}: return what "
            "Model.forward returns (the same tuple or single tensor)")}
    several = len(exp_list) > 1
    for i, (e, g) in enumerate(zip(exp_list, got_list, strict=True)):
        if not isinstance(e, torch.Tensor) or not isinstance(g, torch.Tensor):
            if isinstance(e, torch.Tensor) != isinstance(g, torch.Tensor):
                report = {"kind": "type", "hint": (
                    f"expected a {type(e).__name__}, got a {type(g).__name__}")}
                return {"output": i, **report} if several else report
            continue
        report = _diagnose_tensor(e, g, atol=atol, rtol=rtol, index=i,
                                  reference_recompute=reference_recompute)
        if report:
            return {"output": i, **report} if several else report
    return {}


def _diagnose_tensor(e: torch.Tensor, g: torch.Tensor, *, atol: float, rtol: float, index: int,
                     reference_recompute: Callable[[str], Any] | None) -> dict[str, Any]:
    if tuple(g.shape) != tuple(e.shape):
        return explain_shape(e, g, atol=atol, rtol=rtol)
    if g.dtype != e.dtype:
        return explain_dtype(e, g, atol=atol, rtol=rtol)
    if g.numel() == 0 or _passes(e, g, atol, rtol):
        return {}
    report: dict[str, Any] = {"kind": "values"}
    report.update(worst_elements(e, g, atol=atol, rtol=rtol))
    bad = nonfinite(g)
    ref_bad = nonfinite(e)
    pattern = None if ref_bad else _pattern(e, g, atol=atol, rtol=rtol)
    if pattern:
        report["pattern"] = pattern
    if ref_bad:
        report["reference_nonfinite"] = ref_bad
        report["hint"] = ("the reference's own output has NaN/inf values for these inputs: the "
                          "problem is degenerate (tell the admins)")
    if bad:
        report["kind"] = "nonfinite"
        report["nonfinite"] = bad
        report.setdefault("hint", _describe_nonfinite(bad) + (
            ": look for a division by zero, log/sqrt of a negative, an overflow, an "
            "uninitialised accumulator or an out-of-bounds load (tl.load with a mask needs "
            "other=0)"))
        return report
    if ref_bad or e.dtype != torch.float32 or reference_recompute is None:
        return report
    if pattern and pattern.get("fits_precision") is False:
        return report  # the pattern names a bug: no precision guess, no recomputation
    report["candidate_error"] = _num(_mean_abs(e, g) or 0.0)
    precision: dict[str, dict] = {}
    for name in VARIANTS:
        try:
            outputs = _flatten(reference_recompute(name))
            match = precision_match(e, g, outputs[index]) if index < len(outputs) else None
            del outputs
        except Exception:
            match = None
        if match is not None:
            precision[name] = match
    if precision:
        report["precision"] = precision
        chosen = _choose(precision)
        if chosen:
            report["precision_match"] = chosen
            if precision[chosen].get("same_rounding"):
                report["precision_match_by"] = "same_rounding"
                report["hint"] = "The error is " + HINTS[chosen]
            else:  # the size alone: a bug can have it too
                report["precision_match_by"] = "error_size"
                report["hint"] = ("Maybe a precision issue: the error is about as large as "
                                  "(though not the same as) one " + HINTS[chosen])
    return report


def _pattern(e: torch.Tensor, g: torch.Tensor, *, atol: float,
             rtol: float) -> dict[str, Any] | None:
    try:
        return error_shape.find(e, g, atol=atol, rtol=rtol)
    except Exception as exc:  # a courtesy: the rest of the diagnosis stands without it
        return {"kind": "unknown", "error": f"{type(exc).__name__}: {exc}"[:300]}


# --- recomputing the reference -------------------------------------------------------------

def round_to_tf32(t: torch.Tensor, *, truncate: bool = False) -> torch.Tensor:
    """An fp32 tensor with its mantissa cut to TF32's 10 bits (round to nearest even, or
    truncated), still fp32. Other dtypes are returned as they are."""
    if not isinstance(t, torch.Tensor) or t.dtype != torch.float32:
        return t
    bits = t.detach().contiguous().view(torch.int32)
    if not truncate:
        bits = bits + (0x0FFF + ((bits >> 13) & 1))
    rounded = (bits & -0x2000).view(torch.float32).reshape(t.shape)
    return torch.where(torch.isfinite(t), rounded, t)


def _f(name: str) -> Any:
    obj: Any = torch
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


# Functions whose operands TF32 rounds: name -> (positional indexes, keyword names) of the
# operands; None: every tensor argument. Bias and accumulated inputs stay fp32.
_TF32_OPERANDS: dict[str, tuple[tuple[int, ...], tuple[str, ...]] | None] = {
    "matmul": None, "mm": None, "bmm": None, "mv": None, "inner": None, "tensordot": None,
    "einsum": None, "linalg.matmul": None, "linalg.multi_dot": None, "chain_matmul": None,
    "Tensor.matmul": None, "Tensor.mm": None, "Tensor.bmm": None, "Tensor.mv": None,
    "Tensor.__matmul__": None, "Tensor.__rmatmul__": None,
    "addmm": ((1, 2), ("mat1", "mat2")), "baddbmm": ((1, 2), ("batch1", "batch2")),
    "addbmm": ((1, 2), ("batch1", "batch2")), "addmv": ((1, 2), ("mat", "vec")),
    "nn.functional.linear": ((0, 1), ("input", "weight")),
    "nn.functional.bilinear": ((0, 1, 2), ("input1", "input2", "weight")),
    "nn.functional.scaled_dot_product_attention": ((0, 1, 2), ("query", "key", "value")),
    **{f"nn.functional.{c}": ((0, 1), ("input", "weight")) for c in (
        "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
        "conv_transpose3d")},
}


def _round_all(value: Any, truncate: bool) -> Any:
    if isinstance(value, torch.Tensor):
        return round_to_tf32(value, truncate=truncate)
    if isinstance(value, (list, tuple)):
        return type(value)(_round_all(v, truncate) for v in value)
    return value


class EmulatedTF32(TorchFunctionMode):
    """Runs matmuls and convolutions on operands rounded to TF32 (see the module's doc)."""

    def __init__(self, *, truncate: bool = False) -> None:
        super().__init__()
        self.truncate = truncate
        self.operands = {f: spec for name, spec in _TF32_OPERANDS.items()
                         if (f := _f(name)) is not None}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in self.operands:
            spec = self.operands[func]
            if spec is None:
                args = _round_all(tuple(args), self.truncate)
                kwargs = {k: _round_all(v, self.truncate) for k, v in kwargs.items()}
            else:
                positions, names = spec
                args = tuple(round_to_tf32(a, truncate=self.truncate) if i in positions else a
                             for i, a in enumerate(args))
                for k in names:
                    if k in kwargs:
                        kwargs[k] = round_to_tf32(kwargs[k], truncate=self.truncate)
        return func(*args, **kwargs)


@contextmanager
def _real_tf32() -> Iterator[None]:
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (matmul.allow_tf32, cudnn.allow_tf32)
    try:
        matmul.allow_tf32 = True
        cudnn.allow_tf32 = True
        yield
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = saved


def recompute_tf32(model: Any, inputs: list, *, truncate: bool = False) -> Any:
    """The reference's outputs with TF32 matmuls and convolutions: real TF32 on a CUDA device
    (unless `truncate`), emulated otherwise."""
    other = copy.deepcopy(model)
    on_cuda = any(t.is_cuda for t in inputs if isinstance(t, torch.Tensor)) or any(
        p.is_cuda for p in getattr(other, "parameters", list)())
    with torch.no_grad():
        if on_cuda and not truncate:
            with _real_tf32():
                return other(*inputs)
        with EmulatedTF32(truncate=truncate):
            return other(*inputs)


def recomputer(model: Any, inputs: list, *,
               deadline: float | None = None) -> Callable[[str], Any] | None:
    """`reference_recompute` for diagnose(): the reference `model` run again on `inputs` in
    each variant; None when the problem is too large for the precision check. With a
    `deadline` (time.monotonic()), a variant that would likely end past it is skipped."""
    from evaluator.judge import exploits

    size = exploits.nbytes(inputs)
    params = sum(p.numel() * p.element_size() for p in getattr(model, "parameters", list)())
    limit = exploits.PRECISION_CHECK_MAX_BYTES
    if size > limit or params > limit // 2:
        return None
    longest = [0.0]

    def recompute(name: str) -> Any:
        start = time.monotonic()
        if deadline is not None and start + 2 * longest[0] + 1.0 > deadline:
            raise TimeoutError("no time left to recompute the reference")
        try:
            if name == "tf32":
                return recompute_tf32(model, inputs)
            if name == "tf32_truncated":
                return recompute_tf32(model, inputs, truncate=True)
            return exploits.recompute_reference(model, inputs, name)
        finally:
            longest[0] = max(longest[0], time.monotonic() - start)

    return recompute


def trial_diagnosis(model: Any, inputs: list, expected: Any, got: Any, *, atol: float,
                    rtol: float, deadline: float | None = None) -> dict[str, Any]:
    """The diagnosis of a failed trial, the reference recomputed where that can help."""
    return diagnose(expected, got, atol=atol, rtol=rtol,
                    reference_recompute=recomputer(model, inputs, deadline=deadline))
