"""CSV and JSON downloads of any leaderboard table (?format=csv|json&table=<name>). Every table
whose rows name a board has its precision and label (a board is one problem, hardware and
precision: selectors.board_fields); a board's own download is of that one board."""

import csv
import io
import json

from django.http import HttpResponse, JsonResponse

FORMATS = ("csv", "json")


def _flatten(row: dict, prefix: str = "") -> dict:
    """Nested dicts (fast_p, pass@k) become columns such as `fast_p.1.5`; rendered HTML and
    URLs of this site are left out."""
    flat = {}
    for key, value in row.items():
        if key in ("html", "key"):
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, prefix=f"{name}."))
        elif isinstance(value, list | tuple):
            flat[name] = ";".join(str(v) for v in value)
        else:
            flat[name] = value
    return flat


def _cell(value) -> str:
    if value is None:
        return ""
    text = str(value)
    # A spreadsheet would run a cell that starts like a formula; quote names such as "=cmd".
    if isinstance(value, str) and text[:1] in ("=", "+", "-", "@"):
        return "'" + text
    return text


def to_csv(rows: list[dict], *, columns: list[str]) -> str:
    flat = [_flatten(r) for r in rows]
    columns = list(columns)
    for row in flat:  # columns a row has beyond the declared ones (e.g. pass@k up to its k)
        columns += [c for c in row if c not in columns]
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(columns)
    for row in flat:
        writer.writerow([_cell(row.get(c)) for c in columns])
    return out.getvalue()


def export_response(
    request, tables: dict[str, tuple[list[str], list[dict]]], *, basename: str
) -> HttpResponse | None:
    """The requested table as a download, None when the request asks for no export, or a 400
    that says what is wrong with the request."""
    fmt = request.GET.get("format")
    if fmt is None:
        return None
    if fmt not in FORMATS:
        return HttpResponse(
            f"Unknown format {fmt!r}: use one of {', '.join(FORMATS)}.",
            status=400,
            content_type="text/plain",
        )
    name = request.GET.get("table") or next(iter(tables))
    if name not in tables:
        return HttpResponse(
            f"Unknown table {name!r}: this page has {', '.join(tables)}.",
            status=400,
            content_type="text/plain",
        )
    columns, rows = tables[name]
    filename = f"{basename}-{name}.{fmt}"
    if fmt == "json":
        clean = [{k: v for k, v in r.items() if k != "html"} for r in rows]
        response = JsonResponse({"table": name, "rows": clean}, json_dumps_params={"indent": 1})
    else:
        response = HttpResponse(
            to_csv(rows, columns=columns), content_type="text/csv; charset=utf-8"
        )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def json_download(data: dict, *, filename: str) -> HttpResponse:
    response = HttpResponse(json.dumps(data, indent=1), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


FAST_P_COLUMNS = [f"fast_p.{p}" for p in ("0", "0.5", "0.8", "1", "1.5", "2")]

COLUMNS = {
    "board": [
        "rank",
        "shown_rank",
        "tie",
        "participant",
        "participant_key",
        "submission_id",
        "evaluation_id",
        "candidate_ms",
        "interval_ms",
        "low_ms",
        "high_ms",
        "reference_ms",
        "speedup",
        "speedup_eager",
        "speedup_compile",
        "backend",
        "precision",
        "date",
    ],
    "flagged": ["participant", "participant_key", "evaluation_id", "candidate_ms", "flags", "date"],
    "records": [
        "problem",
        "hardware",
        "precision",
        "board",
        "participant",
        "participant_key",
        "submission_id",
        "candidate_ms",
        "previous_ms",
        "speedup",
        "date",
    ],
    "models": [
        "model",
        "litellm_name",
        "hardware",
        "level",
        "baseline",
        "problems",
        "attempted",
        "compiled",
        "correct",
        "compile_rate",
        "correct_rate",
        *FAST_P_COLUMNS,
        "geomean_speedup",
    ],
    "people": [
        "rank",
        "user",
        "hardware",
        "level",
        "baseline",
        "problems",
        "solved",
        "fast_1_count",
        "compiled",
        "correct_rate",
        *FAST_P_COLUMNS,
        "geomean_speedup",
    ],
    "runs": [
        "run_id",
        "run",
        "model",
        "hardware",
        "level",
        "baseline",
        "samples_per_problem",
        "evaluated_samples",
        "problems",
        "attempted",
        "compiled",
        "correct",
        "compile_rate",
        "correct_rate",
        *FAST_P_COLUMNS,
        "geomean_speedup",
    ],
    "entries": [
        "problem",
        "hardware",
        "precision",
        "board",
        "participant",
        "rank",
        "candidate_ms",
        "speedup",
        "speedup_eager",
        "speedup_compile",
        "backend",
        "submission_id",
        "evaluated",
        "compiled",
        "flags",
        "retired",
        "date",
    ],
    "busiest": ["problem", "level", "number", "submissions", "participants", "ranked"],
    "boards": [
        "problem", "level", "number", "hardware", "precision", "board", "retired",
        "participants", "ranked",
    ],
}
