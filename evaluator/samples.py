"""What the judge and the worker compute alike: the inputs of every later use of a set (drawn
from a seed the worker is given only where it must draw), the sampled summary of an output
(with the judge's own seed), and the description of init inputs and kept outputs.

Plain functions of torch: the judge imports them in its own process; the worker's copy is
covered by its integrity snapshot (worker/probe.py, Snapshot).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from evaluator.loading import derive_seed, make_inputs

SAMPLES_PER_OUTPUT = 256
KEEP_CALLS = 4  # outputs of the first calls are kept and sampled again at the end
KEEP_BYTES = 1 << 30

Draw = Callable[[int, int], list]  # (set j, use k) -> that use's inputs


def draw_seed(seed: int, j: int, k: int) -> int:
    """The seed of input set `j`'s k-th use (k >= 1; use 0 is the set the judge made).

    A hash of the refresh seed, so the seeds of the uses tell nothing about each other or about
    the server's seed (the judge's trial and timing seeds stay secret from the worker)."""
    return derive_seed(seed, "draw", j * 1_000_003 + k)


def draw_inputs(module: Any, seed: int, device: str, precision: str) -> Draw:
    """Draws of the problem's own inputs for uses k >= 1 of each set (the judge's alone: no
    draw function or seed ever reaches the worker)."""
    def draw(j: int, k: int) -> list:
        return make_inputs(module, draw_seed(seed, j, k), device, precision)
    return draw


def sample_index(numel: int, seed: int, i: int) -> torch.Tensor:
    """Positions sampled in output `i` (the first and last element included)."""
    if numel <= SAMPLES_PER_OUTPUT + 2:
        return torch.arange(numel)
    gen = torch.Generator().manual_seed((seed * 1000003 + i * 7919) % (2**63 - 1))
    idx = torch.randint(0, numel, (SAMPLES_PER_OUTPUT,), generator=gen)
    return torch.cat([torch.tensor([0, numel - 1]), idx])


def flatten_output(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        out: list[Any] = []
        for v in value:
            out.extend(flatten_output(v))
        return out
    return [value]


def storage_ptr(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().data_ptr()) if t.numel() else 0
    except Exception:  # wrapper subclasses have no storage
        return 0


def summarize_output(value: Any, seed: int) -> tuple[list[dict[str, Any]], torch.Tensor]:
    """Facts about each output leaf, and the sampled values of all leaves (float64, on the CPU).

    Sums are float64 over every element, so a wrong value anywhere moves them (the judge holds
    them to the same tolerance as the elements, summed)."""
    infos: list[dict[str, Any]] = []
    parts: list[torch.Tensor] = []
    for i, leaf in enumerate(flatten_output(value)):
        if isinstance(leaf, torch.Tensor):
            t = leaf
            info: dict[str, Any] = {
                "kind": "tensor", "type": type(t).__name__, "exact": type(t) is torch.Tensor,
                "shape": list(t.shape), "dtype": str(t.dtype), "device": str(t.device),
                "numel": t.numel(), "ptr": storage_ptr(t),
            }
            try:
                flat = t.detach().reshape(-1)
                if t.is_complex():
                    flat = torch.view_as_real(flat).reshape(-1)
                total = float(torch.sum(flat, dtype=torch.float64)) if flat.numel() else 0.0
                if flat.is_floating_point():
                    absolute = float(torch.sum(flat.abs(), dtype=torch.float64))
                elif flat.dtype == torch.bool:
                    absolute = total
                else:
                    absolute = float(torch.sum(flat.abs(), dtype=torch.float64))
                idx = sample_index(flat.numel(), seed, i)
                parts.append(flat[idx.to(flat.device)].to(torch.float64).cpu())
                info["sum"] = total if math.isfinite(total) else None
                info["abs_sum"] = absolute if math.isfinite(absolute) else None
                info["finite"] = math.isfinite(total) and math.isfinite(absolute)
                info["samples"] = int(idx.numel())
            except Exception as exc:  # a tensor subclass that refuses to be read
                info["error"] = f"{type(exc).__name__}: {exc}"[:200]
                info["samples"] = 0
            infos.append(info)
        elif isinstance(leaf, (bool, int, float)):
            v = float(leaf)
            infos.append({"kind": "number", "type": type(leaf).__name__, "exact": True,
                          "sum": v if math.isfinite(v) else None, "abs_sum": abs(v)
                          if math.isfinite(v) else None, "finite": math.isfinite(v),
                          "samples": 1})
            parts.append(torch.tensor([v], dtype=torch.float64))
        else:
            infos.append({"kind": "other", "type": type(leaf).__name__, "exact": leaf is None,
                          "samples": 0})
    samples = torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)
    return infos, samples


def describe(value: Any) -> Any:
    """A JSON description of init inputs (numbers as they are, tensors by dtype, shape, sum)."""
    if isinstance(value, torch.Tensor):
        return ["tensor", str(value.dtype), list(value.shape),
                float(value.double().sum()) if value.numel() else 0.0]
    if isinstance(value, (list, tuple)):
        return [describe(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)[:100]
