"""Where a kernel's time goes: the per-kernel table and the roofline of a GPU evaluation.

The profile (the harness's profiled call, `Evaluation.profile`) gives each kernel's device
time; the problem's bytes and FLOPs (the speed-of-light check's `cost`) and the hardware's peaks
turn the whole call's time into achieved rates. Per-kernel bytes and FLOPs come only from an
Nsight Compute report (`ncu_kernels`), which places each kernel on the roofline by itself.
"""

from __future__ import annotations

from typing import Any

from django.utils.safestring import SafeString

from evaluator.config import peak_rate
from kbsite import svg

SIDES = (("candidate", "Submitted kernel"), ("reference", "Reference (PyTorch)"))


def problem_bytes(cost: dict[str, Any]) -> float | None:
    """The least bytes one call moves: what it must read plus what it writes."""
    read, written = cost.get("read_bytes_lower_bound"), cost.get("output_bytes")
    if read is None and written is None:
        return None
    return float(read or 0) + float(written or 0)


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"


def _us(value: float | None) -> str:
    return "" if value is None else f"{value:,.1f} µs"


def rate_text(achieved: float | None, of_peak: float | None, unit: str, scale: float) -> str:
    """"1,234 GB/s (25.7% of peak)"; empty when nothing is known."""
    if not achieved:
        return ""
    text = f"{achieved / scale:,.3g} {unit}"
    return f"{text} ({of_peak:.1%} of peak)" if of_peak is not None else text


def _rate(amount: float | None, seconds: float, peak: float | None) -> dict[str, Any]:
    if not amount or seconds <= 0:
        return {}
    achieved = amount / seconds
    return {"achieved": achieved, "of_peak": achieved / peak if peak else None}


def shared_call_scale(data: dict[str, Any], median_ms: float | None,
                      beside_other_work: bool) -> float | None:
    """The factor that brings a profiled call's kernel times to the side's timed median, or
    None to show them as measured. Only for a call made while other work ran on the device
    (the correctness trials, beside which a profiling process makes its call): its kernels
    shared the device, so their times say more of the neighbours than of the kernel (an H200's
    19_ReLU showed 6,129 us beside the trials, timed alone at 3,248 us). Scaled only where the
    kernels' sum exceeds the median, which a call that had the device to itself cannot show
    unless its kernels overlapped on several streams; timed medians are taken alone."""
    total = float(data.get("device_total_us") or 0.0)
    if not beside_other_work or not median_ms or median_ms <= 0 or total <= 0:
        return None
    median_us = float(median_ms) * 1000.0
    return median_us / total if total > median_us else None


def profile_view(evaluation, *, ncu_kernels: list[dict] | None = None) -> dict[str, Any] | None:
    """The table and roofline for the page, the API and the CLI; None without a profile."""
    profile = evaluation.profile or {}
    if not (profile.get("candidate") or {}).get("kernels"):
        return None
    hardware = evaluation.hardware
    checks = (evaluation.static_report or {}).get("checks") or {}
    cost = checks.get("cost") or {}
    moved = problem_bytes(cost)
    flops = float(cost["flops"]) if cost.get("flops") else None
    peak_bw = hardware.peak_bandwidth_gbs * 1e9 if hardware.peak_bandwidth_gbs else None
    tflops = peak_rate(hardware.peak_tflops or {}, evaluation.submission.precision)
    peak_flops = tflops * 1e12 if tflops else None
    beside = bool((checks.get("profiler") or {}).get("beside_trials"))
    medians = {"candidate": evaluation.candidate_median_ms,
               "reference": evaluation.reference_median_ms}
    sides = []
    points: list[tuple[str, float, float, int]] = []
    for index, (key, label) in enumerate(SIDES):
        data = profile.get(key) or {}
        if not data.get("kernels"):
            continue
        measured_us = data.get("device_total_us")
        scale = shared_call_scale(data, medians[key], beside)
        kernels = [{**k, "time": _us(k.get("device_us")), "share_text": _pct(k.get("share"))}
                   for k in data["kernels"]]
        total_us, scaled = measured_us, ""
        if scale is not None:
            for kernel in kernels:
                if kernel.get("device_us") is not None:
                    kernel["device_us"] = round(float(kernel["device_us"]) * scale, 3)
                    kernel["time"] = _us(kernel["device_us"])
            total_us = round(float(measured_us) * scale, 3)
            scaled = (f"Scaled to the timed median: the profiled call ran beside other work on "
                      f"the device, and its kernels took {_us(measured_us)} in all there.")
        seconds = float(total_us or 0.0) / 1e6
        bandwidth = _rate(moved, seconds, peak_bw)
        compute = _rate(flops, seconds, peak_flops)
        sides.append({
            "key": key,
            "label": label,
            "kernels": kernels,
            "device_total_us": total_us,
            "measured_total_us": measured_us,
            "scaled": scaled,
            "total_text": _us(total_us),
            "bandwidth_text": rate_text(bandwidth.get("achieved"), bandwidth.get("of_peak"),
                                        "GB/s", 1e9),
            "compute_text": rate_text(compute.get("achieved"), compute.get("of_peak"),
                                      "TFLOP/s", 1e12),
            "bytes_per_s": bandwidth.get("achieved"),
            "bandwidth_of_peak": bandwidth.get("of_peak"),
            "flops_per_s": compute.get("achieved"),
            "flops_of_peak": compute.get("of_peak"),
            "error": data.get("error", ""),
        })
        if moved and flops and seconds > 0:
            points.append((f"{label} (whole call)", flops / moved, flops / seconds, index))
    series = [label for _, label in SIDES]
    for kernel in ncu_kernels or []:
        nbytes, kflops = kernel.get("dram_bytes"), kernel.get("flops")
        ns = kernel.get("duration_ns")
        if nbytes and kflops and ns:
            points.append((f"ncu: {kernel.get('name', '?')[:60]}", kflops / nbytes,
                           kflops / (ns * 1e-9), len(SIDES)))
    if any(p[3] == len(SIDES) for p in points):
        series.append("ncu, per kernel")
    chart: SafeString | str = ""
    if peak_bw and peak_flops:
        chart = svg.roofline_chart(points, series=series, peak_flops=peak_flops,
                                   peak_bytes_per_s=peak_bw,
                                   title=f"Roofline on {hardware.name or hardware.slug}")
    return {
        "sides": sides,
        "basis": profile.get("basis", ""),
        "problem_bytes": moved,
        "problem_flops": flops,
        "peak_bandwidth_gbs": hardware.peak_bandwidth_gbs,
        "peak_tflops": tflops,
        "roofline": chart,
    }
