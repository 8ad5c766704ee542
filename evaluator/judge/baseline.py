"""A problem's baselines: the reference timed eager and under torch.compile (inductor, default
mode), the judge's "baseline" mode (validate.run dispatches here). With measure=False the
compiled graphs are only built into the cache ahead of the timed run.
"""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path
from typing import Any

from evaluator import EVALUATOR_VERSION
from evaluator.errors import short_message, unavailable_reason
from evaluator.judge.validate import REFERENCE_MODULE, _set_count, _timing_options


def measure_baseline(job: dict, emit) -> dict:
    """Time the reference eager and under torch.compile (inductor, default mode)."""
    import torch

    from evaluator import environment

    device = job["device"]
    modes = list(job.get("baseline_modes") or ("eager", "compile"))
    result: dict[str, Any] = {
        "mode": "baseline",
        "verdict": "measured",
        "eager": None,
        "compile": None,
        "errors": {},
        "environment": {},
        "phases": {},
        "error": "",
        "traceback": "",
        "evaluator_version": EVALUATOR_VERSION,
    }
    if device != "cpu" and not torch.cuda.is_available():
        result.update(verdict="harness_error", error=f"device {device} is not available here")
        return result
    if job.get("build_dir"):
        # Compiled graphs outlive this process's fresh working folder, so a re-run is quick.
        os.environ.setdefault(
            "TORCHINDUCTOR_CACHE_DIR", str(Path(job["build_dir"]) / "inductor")
        )
    result["environment"] = environment.collect(device)
    # measure=False compiles ahead: the graphs are built into the cache and nothing is timed.
    warm_only = not job.get("measure", True)
    emit({"type": "phase", "phase": "loading"})
    try:
        model, sets = _load(job, n_sets=1 if warm_only else _set_count(job, 3))
    except BaseException as exc:
        unavailable = unavailable_reason(exc)
        result.update(
            verdict="problem_unavailable" if unavailable else "runtime_error",
            error=unavailable or f"the reference failed to load: {short_message(exc)}",
            traceback="".join(traceback.format_exception(exc))[-8000:],
        )
        return result

    for mode in modes:
        emit({"type": "phase", "phase": f"timing {mode}"})
        started = time.perf_counter()
        try:
            result[mode] = _measure(job, mode, model, sets, warm_only=warm_only)
        except BaseException as exc:
            result["errors"][mode] = short_message(exc)
            continue
        result["phases"][mode] = time.perf_counter() - started
    if not any(result[mode] for mode in modes):
        result["verdict"] = "runtime_error"
        result["error"] = "; ".join(f"{k}: {v}" for k, v in result["errors"].items())
    return result


def _load(job: dict, *, n_sets: int) -> tuple[Any, list]:
    """The reference's model and its timing input sets, from the job's seed."""
    from evaluator.loading import (
        build_model,
        derive_seed,
        make_init_inputs,
        make_inputs,
        module_from_source,
    )

    device, precision, seed = job["device"], job["precision"], int(job["seed"])
    module = module_from_source(job["reference_source"], REFERENCE_MODULE)
    init_seed = derive_seed(seed, "init")
    model = build_model(
        module.Model, make_init_inputs(module, init_seed), init_seed, device, precision
    )
    sets = [make_inputs(module, derive_seed(seed, "timing", j), device, precision)
            for j in range(n_sets)]
    return model, sets


def _measure(job: dict, mode: str, model: Any, sets: list, *, warm_only: bool) -> dict:
    """One mode's summary: eager as is; compile's first call (which compiles) kept apart."""
    import torch

    from evaluator.timing import summarize, time_callable

    device = job["device"]
    started = time.perf_counter()
    compile_s = None
    fn = model
    if mode == "compile":
        if warm_only:
            # Compiling ahead shares a busy device (judge.run_mode): Triton configs it would
            # pick by benchmarking there are not kept; the timed run, which has the device
            # alone, picks its own on its first call.
            import torch._inductor.config as inductor_config

            inductor_config.autotune_local_cache = False
        fn = torch.compile(model)
        # The first call compiles; its time is kept apart from the timed calls.
        with torch.no_grad():
            fn(*sets[0])
        if device != "cpu":
            torch.cuda.synchronize(device)
        compile_s = time.perf_counter() - started
    if warm_only:
        return {"compile_s": compile_s}
    stats = time_callable(fn, sets, device, **_timing_options(job))
    summary = summarize(stats["samples_ms"]) or {}
    summary.update({k: stats[k] for k in ("stopped", "rel_err", "input_sets")})
    if compile_s is not None:
        summary["compile_s"] = compile_s
    return summary
