"""Comparing a candidate's outputs with the reference's: exact structure, shape, dtype, device;
values within atol + rtol * |expected|; NaN or inf never passes."""

from __future__ import annotations

import math
from typing import Any

import torch


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        out: list[Any] = []
        for v in value:
            out.extend(_flatten(v))
        return out
    return [value]


def same_device(actual: str, expected: str) -> bool:
    """cuda and cuda:0 name the same device when 0 is the current one."""
    a, e = torch.device(actual), torch.device(expected)
    if a.type != e.type:
        return False
    if a.type != "cuda" or a.index == e.index:
        return True
    current = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return (a.index if a.index is not None else current) == (
        e.index if e.index is not None else current
    )


_CHUNK = 1 << 26  # elements per comparison step, so huge outputs need little extra memory


def _diff_stats(exp: torch.Tensor, act: torch.Tensor, atol: float, rtol: float) -> dict:
    """max |diff|, sum |diff| and max(|diff| - allowed) over two same-shape tensors, in chunks."""
    exp_flat, act_flat = exp.reshape(-1), act.reshape(-1)
    floating = exp.is_floating_point() or exp.is_complex()
    if floating:
        work = torch.promote_types(exp.dtype, torch.float32)
    max_abs, sum_abs, excess = 0.0, 0.0, -math.inf
    for start in range(0, exp_flat.numel(), _CHUNK):
        e = exp_flat[start:start + _CHUNK]
        a = act_flat[start:start + _CHUNK]
        if floating:
            a_bad = int((~torch.isfinite(a)).sum())
            if a_bad:
                return {"reason": f"{a_bad} NaN/inf values in the output", "nonfinite": a_bad}
            if not bool(torch.isfinite(e).all()):
                # NaN never passes, even when the reference made it: the problem is degenerate.
                return {"reason": "the reference output has NaN/inf values"}
            e_w, a_w = e.to(work), a.to(work)
            diff = (a_w - e_w).abs()
            allowed = atol + rtol * e_w.abs()
            if diff.is_complex():
                diff, allowed = diff.real, allowed.real
            excess = max(excess, float((diff - allowed).max()))
        else:
            # Integers and bools must match exactly.
            diff = (a.long() - e.long()).abs().double()
            excess = max(excess, float(diff.max()))
        max_abs = max(max_abs, float(diff.max()))
        sum_abs += float(diff.double().sum())
    return {"max_abs": max_abs, "sum_abs": sum_abs, "excess": excess}


def compare_outputs(
    expected: Any, actual: Any, *, atol: float, rtol: float, expected_device: str
) -> dict[str, Any]:
    """Return {passed, max_abs_diff, mean_abs_diff, reason?, ...} for one trial."""
    exp_list, act_list = _flatten(expected), _flatten(actual)
    result: dict[str, Any] = {"passed": False, "max_abs_diff": None, "mean_abs_diff": None}
    if len(exp_list) != len(act_list):
        result["reason"] = f"expected {len(exp_list)} outputs, got {len(act_list)}"
        return result
    max_abs = 0.0
    sum_abs = 0.0
    count = 0
    for i, (exp, act) in enumerate(zip(exp_list, act_list, strict=True)):
        where = f"output {i}: " if len(exp_list) > 1 else ""
        if not isinstance(exp, torch.Tensor):
            # Scalars (rare): compare as numbers.
            if isinstance(act, torch.Tensor) or type(act) is not type(exp):
                result["reason"] = (
                    f"{where}expected a {type(exp).__name__}, got {type(act).__name__}"
                )
                return result
            if isinstance(exp, float):
                if not math.isfinite(act) or abs(act - exp) > atol + rtol * abs(exp):
                    result["reason"] = f"{where}value {act!r} != {exp!r}"
                    return result
            elif act != exp:
                result["reason"] = f"{where}value {act!r} != {exp!r}"
                return result
            continue
        if not isinstance(act, torch.Tensor):
            result["reason"] = f"{where}expected a tensor, got {type(act).__name__}"
            return result
        if tuple(act.shape) != tuple(exp.shape):
            result["reason"] = f"{where}shape {tuple(act.shape)} != expected {tuple(exp.shape)}"
            return result
        if act.dtype != exp.dtype:
            result["reason"] = f"{where}dtype {act.dtype} != expected {exp.dtype}"
            return result
        act_device = getattr(act, "_kb_device", str(act.device))
        if not same_device(act_device, expected_device):
            result["reason"] = f"{where}device {act_device} != expected {expected_device}"
            return result
        if act.numel() == 0:
            continue
        stats = _diff_stats(exp, act.to(device=exp.device), atol, rtol)
        if "reason" in stats:
            result["reason"] = where + stats["reason"]
            result.update({k: v for k, v in stats.items() if k != "reason"})
            return result
        max_abs = max(max_abs, stats["max_abs"])
        sum_abs += stats["sum_abs"]
        count += act.numel()
        result["max_abs_diff"] = max_abs
        result["mean_abs_diff"] = sum_abs / count
        if stats["excess"] > 0:
            result["reason"] = (
                f"{where}values differ: max abs diff {max_abs:.3g} "
                f"(atol {atol:g}, rtol {rtol:g})"
            )
            return result
    result["max_abs_diff"] = max_abs
    result["mean_abs_diff"] = sum_abs / count if count else 0.0
    result["passed"] = True
    return result
