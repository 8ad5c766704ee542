"""What a result may hold: JSON-safe values (no NaN, inf, tuples or odd types) and every field
within RESULT_FIELD_MAX_BYTES, cut with a marker that says so. The runner applies both to
whatever the judge sent before anything is stored (sandbox.run_job, gpu_runner's services).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any


def json_safe(value: Any) -> Any:
    """Make the result storable as JSON anywhere (no NaN/inf, no tuples or odd types)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return str(value)


# What the runner keeps of a result, field by field (each top-level key): the worker's replies
# end up there (its final state, its profile, its messages), and a stored row is served whole.
RESULT_FIELD_MAX_BYTES = int(os.environ.get("KB_RESULT_FIELD_MAX_BYTES", str(256 * 1024)))
TRUNCATED = "[... truncated: {n} bytes over the stored limit ...]"


def _shrink(value: Any, max_str: int, max_items: int, depth: int = 0) -> Any:
    if isinstance(value, str):
        if len(value) <= max_str:
            return value
        return value[:max_str] + TRUNCATED.format(n=len(value) - max_str)
    if depth > 32:
        return TRUNCATED.format(n="nested")
    if isinstance(value, list):
        out = [_shrink(v, max_str, max_items, depth + 1) for v in value[:max_items]]
        if len(value) > max_items:
            out.append(TRUNCATED.format(n=f"{len(value) - max_items} items,"))
        return out
    if isinstance(value, dict):
        items = list(value.items())
        out = {str(k)[:max_str]: _shrink(v, max_str, max_items, depth + 1)
               for k, v in items[:max_items]}
        if len(items) > max_items:
            out["__truncated__"] = TRUNCATED.format(n=f"{len(items) - max_items} keys,")
        return out
    return value


def cap_field(value: Any, max_bytes: int = RESULT_FIELD_MAX_BYTES) -> Any:
    """`value` (JSON-safe) within about `max_bytes` of JSON: long strings, lists and dicts cut
    with a marker saying so, tighter each round until it fits."""
    size = len(json.dumps(value))
    if size <= max_bytes:
        return value
    max_str, max_items = max_bytes // 4, 1000
    while max_str >= 16:
        shrunk = _shrink(value, max_str, max_items)
        if len(json.dumps(shrunk)) <= max_bytes:
            return shrunk
        max_str, max_items = max_str // 4, max(max_items // 4, 4)
    return TRUNCATED.format(n=size)


def cap_result(result: dict[str, Any]) -> dict[str, Any]:
    """Each field of a (JSON-safe) result within RESULT_FIELD_MAX_BYTES."""
    return {key: cap_field(value) for key, value in result.items()}


def with_build_ahead(result: dict[str, Any], built: dict[str, Any]) -> dict[str, Any]:
    """The evaluation's result (or the failed build's own) with its build ahead's time, compiler
    output and outcome (sandbox.builds_ahead)."""
    result.setdefault("phases", {})["build_ahead"] = (built.get("phases") or {}).get("total", 0.0)
    cache = ((built.get("environment") or {}).get("sandbox") or {}).get("build_cache") or {}
    # The judge's verdict and the runner's own facts; nothing the worker said of itself.
    result.setdefault("environment", {})["build_ahead"] = {
        "verdict": built.get("verdict"), "error": built.get("error"),
        "cache": cache.get("outcome")}
    # The compiler spoke in the build; the evaluation loaded what it built.
    log = str(built.get("compile_log") or "")
    if log and log not in str(result.get("compile_log") or ""):
        result["compile_log"] = f"{log}\n{result.get('compile_log') or ''}".rstrip()
    return cap_result(json_safe(result))  # the two logs together, within the stored limit
