"""Speed of light: the least time the hardware needs for a problem, from its bytes and FLOPs.

Bytes: a kernel must read every input element its output depends on and write its outputs. The
elements an output depends on are found with autograd on the reference (an element with a
nonzero gradient is certainly read); integer and bool inputs count in full; parameters do not
count (a kernel may fold them ahead). Written bytes count beyond the L2 only (writes may still
sit in the cache when the kernel ends). Inputs are read from memory because the timing flushes
the L2 before every call. That makes `memory_bound_ms` a true lower bound: a time below it is
physically impossible and flags `faster_than_light`.

FLOPs: counted by torch's FlopCounterMode on the reference (matmuls, convolutions, attention).
They are held against the peak rate and reported, but they are the reference's FLOPs, not the
problem's least: an honest kernel may skip work the reference does (diag(A) @ B as a row scale,
a sum after a GEMM folded into the weights), so beating the compute bound is evidence only.
"""

from __future__ import annotations

from typing import Any

import torch

from evaluator.config import peak_rate
from evaluator.loading import iter_tensors

GRADIENT_MAX_BYTES = 2 << 30


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def problem_cost(model: Any, inputs: list, *, count_flops: bool = True) -> dict[str, Any]:
    """Bytes and FLOPs of one call of the reference on `inputs` (any device).

    Counting FLOPs imports much of torch the first time (seconds on a busy CPU), so the judge
    asks for them only when the job carries peak rates to hold them against.
    """
    cost: dict[str, Any] = {}
    with torch.no_grad():
        if count_flops:
            from torch.utils.flop_counter import FlopCounterMode

            counter = FlopCounterMode(display=False)
            with counter:
                outputs = model(*inputs)
            cost["flops"] = int(counter.get_total_flops())
        else:
            outputs = model(*inputs)
            cost["flops"] = None
    out_tensors = list(iter_tensors(outputs))
    cost["output_bytes"] = sum(_nbytes(t) for t in out_tensors)
    in_tensors = list(iter_tensors(inputs))
    cost["input_bytes"] = sum(_nbytes(t) for t in in_tensors)
    cost["read_bytes_lower_bound"], cost["read_method"] = _read_lower_bound(model, inputs,
                                                                            out_tensors)
    return cost


def _read_lower_bound(model: Any, inputs: list, outputs: list[torch.Tensor]) -> tuple[int, str]:
    """Bytes of input elements that the output certainly depends on (see the module doc)."""
    floating = [i for i, x in enumerate(inputs)
                if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel()]
    fixed = sum(_nbytes(x) for x in inputs
                if isinstance(x, torch.Tensor) and not x.is_floating_point())
    everything = sum(_nbytes(x) for x in inputs if isinstance(x, torch.Tensor))
    if not floating or not any(t.is_floating_point() for t in outputs):
        # No gradient to follow (e.g. argmax): every input counts.
        return everything, "all_inputs"
    if everything > GRADIENT_MAX_BYTES:
        # A backward pass over inputs this large costs the judge several times their memory.
        return everything, "all_inputs"
    try:
        leaves = [x.detach().clone().requires_grad_(True) if i in floating else x
                  for i, x in enumerate(inputs)]
        with torch.enable_grad():
            out = model(*leaves)
            outs = [t for t in iter_tensors(out) if t.is_floating_point() and t.requires_grad]
            if not outs:
                raise RuntimeError("no differentiable output")
            gen = torch.Generator(device=outs[0].device).manual_seed(12345)
            loss = sum((t.float() * torch.rand(t.shape, generator=gen, device=t.device)
                        .add_(0.5)).sum() for t in outs)
            grads = torch.autograd.grad(loss, [leaves[i] for i in floating], allow_unused=True)
        read = fixed
        for i, g in zip(floating, grads, strict=True):
            if g is not None:
                read += int(torch.count_nonzero(g)) * inputs[i].element_size()
        return read, "gradient"
    except Exception:  # not differentiable: fall back to every input
        return sum(_nbytes(x) for x in inputs if isinstance(x, torch.Tensor)), "all_inputs"


def assess(cost: dict[str, Any] | None, candidate_median_ms: float | None, *, precision: str,
           peak_bandwidth_gbs: Any, peak_tflops: Any, l2_bytes: int = 0,
           l2_flushed: bool = True) -> dict[str, Any]:
    """Hold a measured time against the bounds. Returns the report; `faster_than_light` says
    whether the flag applies."""
    report: dict[str, Any] = {"faster_than_light": False}
    if not cost:
        report["skipped"] = "no cost measured"
        return report
    report.update({k: cost.get(k) for k in ("flops", "input_bytes", "output_bytes",
                                             "read_bytes_lower_bound", "read_method")})
    written = max(int(cost.get("output_bytes") or 0) - int(l2_bytes or 0), 0)
    moved = int(cost.get("read_bytes_lower_bound") or 0) + written
    report["bytes_lower_bound"] = moved
    bw = float(peak_bandwidth_gbs) if isinstance(peak_bandwidth_gbs, (int, float)) else None
    if bw and bw > 0:
        report["peak_bandwidth_gbs"] = bw
        report["memory_bound_ms"] = moved / (bw * 1e9) * 1e3
    rate = peak_rate(peak_tflops, precision)
    if rate:
        report["peak_tflops"] = rate
        report["compute_bound_ms"] = (cost.get("flops") or 0) / (rate * 1e12) * 1e3
    if candidate_median_ms is None or candidate_median_ms <= 0:
        return report
    report["candidate_ms"] = candidate_median_ms
    mem = report.get("memory_bound_ms")
    if mem:
        report["achieved_bandwidth_gbs"] = moved / (candidate_median_ms * 1e-3) / 1e9
        report["fraction_of_memory_bound"] = mem / candidate_median_ms
        # Without the L2 flush the inputs may be served from the cache: no bound then.
        report["faster_than_light"] = bool(l2_flushed and candidate_median_ms < mem)
    comp = report.get("compute_bound_ms")
    if comp:
        report["achieved_tflops"] = (cost.get("flops") or 0) / (candidate_median_ms * 1e-3) / 1e12
        report["beats_reference_compute_bound"] = candidate_median_ms < comp
    return report
