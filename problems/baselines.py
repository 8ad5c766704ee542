"""Baselines: storing them, and KernelBench's baseline JSON format in and out.

KernelBench publishes one file per mode, {"level1": {"19_ReLU.py": {"mean", "std", "min", "max",
"num_trials", "hardware", "device"}}}, times in milliseconds: `baseline_time_torch.json` (eager)
and `baseline_time_torch_compile_inductor_default.json` (torch.compile, inductor, default mode).
It reports means, not medians; an imported baseline keeps the mean as its figure and says so.
"""

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from evaluation.models import Hardware
from problems.importing import FILENAME_PATTERN
from problems.models import Baseline, Problem, ProblemVersion

KERNELBENCH_FILES = {
    Baseline.Mode.EAGER: "baseline_time_torch.json",
    Baseline.Mode.COMPILE: "baseline_time_torch_compile_inductor_default.json",
}
LEVEL_KEY = re.compile(r"^level(?P<level>\d+)$")
SLUG_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


class BaselineFileError(ValueError):
    """A baseline file or folder that cannot be read; nothing was stored from it."""


def baseline_record(
    *,
    problem: Problem,
    hardware: Hardware,
    mode: str,
    stats: dict,
    torch_version: str,
    source: str = "measured",
    problem_version: ProblemVersion | None = None,
    environment: dict | None = None,
    measured_at: datetime | None = None,
) -> Baseline:
    """Store the figure for (problem, hardware, mode), replacing an older one; measured_at
    where that was not now (a curation import)."""
    baseline, _ = Baseline.objects.update_or_create(
        problem=problem,
        hardware=hardware,
        mode=mode,
        defaults={
            "problem_version": problem_version or problem.current_version,
            "median_ms": float(stats["median_ms"]),
            "stats": stats,
            "torch_version": torch_version,
            "source": source,
            "environment": environment or {},
            "created_at": measured_at or timezone.now(),
        },
    )
    return baseline


@dataclass
class BaselineImportReport:
    stored: list[str] = field(default_factory=list)  # "level1/19_ReLU eager"
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _mode_of(path: Path) -> str:
    return Baseline.Mode.COMPILE if "compile" in path.name else Baseline.Mode.EAGER


def _positive(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise BaselineFileError(f"{path.name}: not a readable JSON file ({error})") from None
    if not isinstance(data, dict) or not all(LEVEL_KEY.match(str(k)) for k in data):
        raise BaselineFileError(
            f'{path.name}: expected {{"level1": {{"<number>_<Name>.py": {{"mean": ...}}}}}}'
        )
    return data


def _hardware_for_import(slug: str, entries: Iterable[dict]) -> Hardware:
    if not SLUG_PATTERN.match(slug):
        raise BaselineFileError(f"{slug!r} is not a hardware slug (lowercase letters, digits, -)")
    hardware = Hardware.objects.filter(slug=slug).first()
    if hardware:
        return hardware
    first = next(iter(entries), {})
    device = str(first.get("device", ""))
    return Hardware.objects.create(
        slug=slug,
        name=str(first.get("hardware", ""))[:200],
        kind=Hardware.Kind.CPU if device == "cpu" else Hardware.Kind.GPU,
    )


def baselines_import_kernelbench(
    *, path: Path, hardware_slug: str, mode: str | None = None, torch_version: str = ""
) -> BaselineImportReport:
    """Import KernelBench baseline JSON: one file, or a folder holding its two files."""
    path = Path(path)
    if path.is_dir():
        files = [
            (path / name, m) for m, name in KERNELBENCH_FILES.items() if (path / name).exists()
        ]
        if not files:
            raise BaselineFileError(
                f"{path.name}: holds neither {' nor '.join(KERNELBENCH_FILES.values())}"
            )
    elif path.is_file():
        files = [(path, mode or _mode_of(path))]
    else:
        raise BaselineFileError(f"{path} does not exist")
    if mode and mode not in Baseline.Mode.values:
        raise BaselineFileError(f"unknown mode {mode!r}: eager or compile")
    loaded = [(file, file_mode, _load(file)) for file, file_mode in files]
    report = BaselineImportReport()
    entries = [e for _, _, d in loaded for level in d.values() for e in level.values()]
    with transaction.atomic():
        hardware = _hardware_for_import(hardware_slug, [e for e in entries if isinstance(e, dict)])
        for file, file_mode, data in loaded:
            for level_key, problems in data.items():
                level = int(LEVEL_KEY.match(level_key)["level"])
                if not isinstance(problems, dict):
                    report.skipped.append((f"{file.name} {level_key}", "not an object"))
                    continue
                for filename, entry in problems.items():
                    label = f"{file.name} {level_key}/{filename}"
                    why = _import_entry(
                        report, hardware, level, filename, entry, file_mode, torch_version, file
                    )
                    if why:
                        report.skipped.append((label, why))
    return report


def _import_entry(report, hardware, level, filename, entry, mode, torch_version, file) -> str:
    match = FILENAME_PATTERN.match(str(filename))
    if not match:
        return "not a <number>_<Name>.py problem file name"
    if not isinstance(entry, dict):
        return "not an object"
    problem = Problem.objects.filter(level=level, number=int(match["number"])).first()
    if problem is None:
        return "no such problem here (import the problems first)"
    if problem.name != match["name"]:
        return f"this site's problem {match['number']} is {problem.name}, not {match['name']}"
    mean = _positive(entry.get("mean"))
    if mean is None:
        return "no usable mean"
    stats = {
        "median_ms": mean,  # KernelBench reports means; kept as the baseline's figure
        "mean_ms": mean,
        "std_ms": _positive(entry.get("std")),
        "min_ms": _positive(entry.get("min")),
        "max_ms": _positive(entry.get("max")),
        "n": entry.get("num_trials") if isinstance(entry.get("num_trials"), int) else None,
        "statistic": "mean",
    }
    baseline_record(
        problem=problem,
        hardware=hardware,
        mode=mode,
        stats=stats,
        torch_version=torch_version,
        source="imported",
        environment={
            "hardware": str(entry.get("hardware", ""))[:200],
            "device": str(entry.get("device", ""))[:50],
            "file": file.name,
        },
    )
    report.stored.append(f"{problem.slug} {mode}")
    return ""


def _round(value):
    # KernelBench's files carry three significant digits; a little more keeps our precision.
    return float(f"{value:.4g}") if isinstance(value, (int, float)) else value


def baselines_export_kernelbench(
    *, hardware: Hardware, folder: Path, levels: Iterable[int] = ()
) -> dict[str, Path]:
    """Write this hardware's baselines in KernelBench's format; returns {mode: file written}."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    levels = set(levels)
    written: dict[str, Path] = {}
    baselines = Baseline.objects.filter(hardware=hardware).select_related("problem")
    for mode, name in KERNELBENCH_FILES.items():
        data: dict[str, dict] = {}
        rows = sorted(
            (b for b in baselines if b.mode == mode and (not levels or b.problem.level in levels)),
            key=lambda b: (b.problem.level, b.problem.number),
        )
        for baseline in rows:
            problem, stats = baseline.problem, baseline.stats or {}
            mean = stats.get("mean_ms", baseline.median_ms)
            data.setdefault(f"level{problem.level}", {})[f"{problem.number}_{problem.name}.py"] = {
                "mean": _round(mean),
                "std": _round(stats.get("std_ms")),
                "min": _round(stats.get("min_ms")),
                "max": _round(stats.get("max_ms")),
                "num_trials": stats.get("n"),
                "hardware": (baseline.environment or {}).get("hardware") or hardware.name
                or hardware.slug,
                "device": (baseline.environment or {}).get("device")
                or ("cpu" if hardware.kind == Hardware.Kind.CPU else "cuda:0"),
            }
        if data:
            path = folder / name
            path.write_text(json.dumps(data, indent=4) + "\n", encoding="utf-8")
            written[mode] = path
    return written
