"""Curation workflows the site starts (admin, commands): asking a runner to validate a problem,
settling a problem's state from a finished validation, and carrying curation between sites.

The checks themselves run on a runner (gpu_runner.curation) in the sandboxed harness; the web
process never runs reference code. A host that cannot reach the site's database curates against
a site of its own; `curation_export` writes what it measured as JSON and `curation_import` stores
that file on another site (or on a fresh one, to resume the run there).
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django_q.tasks import async_task

from evaluation.models import Hardware
from evaluation.services import HARDWARE_FIELDS, hardware_register
from problems.baselines import SLUG_PATTERN, baseline_record
from problems.models import Baseline, Problem, ProblemVersion, Validation

CURATION_FORMAT = "kbsite-curation"
CURATION_VERSION = 1


class ValidationRequestError(ValueError):
    pass


class CurationFileError(ValueError):
    """A curation file that cannot be imported; nothing was stored from it."""


def validation_request(
    *, problem: Problem, hardware: Hardware, requested_by=None, enqueue: bool = True
) -> Validation:
    """Queue a validation of the problem's current reference on a runner of `hardware`.

    enqueue=False only records it, for a caller that runs it on this host itself.
    """
    if problem.current_version_id is None:
        raise ValidationRequestError(f"{problem.slug} has no reference to validate")
    validation = Validation.objects.create(
        problem_version_id=problem.current_version_id,
        hardware=hardware,
        requested_by=requested_by if getattr(requested_by, "pk", None) else None,
    )
    if not enqueue:
        return validation
    # After the commit, so the runner that picks the task up always finds the row.
    transaction.on_commit(
        lambda: async_task("gpu_runner.tasks.validate", validation.pk, cluster=hardware.queue_name)
    )
    return validation


def validations_missing_request(*, hardware: Hardware) -> list[Validation]:
    """Queue a validation of each published problem's current reference that `hardware` has
    none of (queued, running or finished): a runner calls it as it comes online, so that the
    problems taking submissions there are measured on it (their peak memory is what admits
    evaluations beside each other on a shared GPU, gpu_runner.sharing) before long. One that
    failed is not asked for again (an admin decides what follows a finding). A CPU has nothing
    to admit and runs the sample problems alone: it asks for none."""
    if hardware.kind == Hardware.Kind.CPU:
        return []
    have = Validation.objects.filter(hardware=hardware).values("problem_version_id")
    lacking = (Problem.objects.filter(status=Problem.Status.PUBLISHED,
                                      current_version__isnull=False)
               .exclude(current_version_id__in=have).order_by("level", "number"))
    return [validation_request(problem=problem, hardware=hardware) for problem in lacking]


def validation_settle(*, validation: Validation) -> None:
    """Move the problem on from a finished validation of its current version: a pass marks a
    draft validated; anything else holds a published problem until an admin decides (publish
    with a reason, fix, retire). A validation of an older version changes nothing.

    The runner calls it after storing a result, and a curation import after storing one.
    """
    with transaction.atomic():
        problem = Problem.objects.select_for_update().get(pk=validation.problem_version.problem_id)
        if problem.current_version_id != validation.problem_version_id:
            return
        if validation.status == Validation.Status.PASSED:
            problem.mark_validated()
        else:
            problem.hold_for_findings()


# --- curation as a file ---------------------------------------------------------------------------


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _hardware_export(hardware: Hardware) -> dict:
    exported: dict = {"slug": hardware.slug}
    for name in HARDWARE_FIELDS:
        value = getattr(hardware, name)
        if value is not None and not (isinstance(value, (str, dict, list)) and not value):
            exported[name] = value
    return exported


def _validation_export(validation: Validation) -> dict:
    return {
        "status": validation.status,
        "findings": validation.findings,
        "peak_memory_bytes": validation.peak_memory_bytes,
        "reference_ms": validation.reference_ms,
        "details": validation.details,
        "error": validation.error,
        "environment": validation.environment,
        "finished_at": _iso(validation.finished_at),
    }


def _baseline_export(baseline: Baseline) -> dict:
    return {
        "mode": baseline.mode,
        "median_ms": baseline.median_ms,
        "stats": baseline.stats,
        "torch_version": baseline.torch_version,
        "environment": baseline.environment,
        "created_at": _iso(baseline.created_at),
    }


def curation_export(*, hardware: Hardware, levels: Iterable[int] | None = None) -> dict:
    """What was curated on `hardware`, as JSON-ready data: per problem with a current version
    (of `levels`, or all), its latest finished validation and its measured baselines of that
    version. Problems with neither are left out."""
    problems = Problem.objects.filter(current_version__isnull=False).select_related(
        "current_version"
    )
    if levels is not None:
        problems = problems.filter(level__in=list(levels))
    problems = problems.order_by("level", "slug")
    latest: dict[int, Validation] = {}
    for validation in Validation.objects.filter(
        hardware=hardware,
        status__in=Validation.FINISHED,
        problem_version_id__in=problems.values("current_version_id"),
    ).order_by("-finished_at", "-pk"):
        latest.setdefault(validation.problem_version_id, validation)
    baselines: dict[int, list[Baseline]] = {}
    for baseline in Baseline.objects.filter(
        hardware=hardware,
        source="measured",
        problem_version_id=F("problem__current_version_id"),
        problem__in=problems,
    ).order_by("mode"):
        baselines.setdefault(baseline.problem_id, []).append(baseline)

    entries = []
    for problem in problems:
        validation = latest.get(problem.current_version_id)
        measured = baselines.get(problem.pk, [])
        if validation is None and not measured:
            continue
        entries.append(
            {
                "slug": problem.slug,
                "level": problem.level,
                "source_hash": problem.current_version.source_hash,
                "validation": _validation_export(validation) if validation else None,
                "baselines": [_baseline_export(baseline) for baseline in measured],
            }
        )
    return {
        "format": CURATION_FORMAT,
        "version": CURATION_VERSION,
        "exported_at": _iso(timezone.now()),
        "hardware": _hardware_export(hardware),
        "problems": entries,
    }


@dataclass
class CurationImport:
    validations: list[str] = field(default_factory=list)  # problem slugs
    baselines: list[str] = field(default_factory=list)  # "level3/1_MLP eager"
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (problem slug, why)


@dataclass
class _ValidationEntry:
    status: str
    findings: list[dict]
    peak_memory_bytes: int | None
    reference_ms: float | None
    details: dict
    error: str
    environment: dict
    finished_at: datetime


@dataclass
class _BaselineEntry:
    mode: str
    stats: dict
    torch_version: str
    environment: dict
    created_at: datetime | None


@dataclass
class _ProblemEntry:
    slug: str
    source_hash: str
    validation: _ValidationEntry | None
    baselines: list[_BaselineEntry]


def _is_integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_KINDS = {
    "a string": lambda value: isinstance(value, str),
    "an integer": _is_integer,
    "a finite number": _is_number,
    "an object": lambda value: isinstance(value, dict),
    "a list": lambda value: isinstance(value, list),
}
_REQUIRED = object()


def _field(raw: dict, key: str, where: str, kind: str, *, default=_REQUIRED, null=False):
    """raw[key], checked to be of `kind` (a key of _KINDS); `default` when it is absent."""
    if key not in raw:
        if default is _REQUIRED:
            raise CurationFileError(f"{where}: {key!r} is missing")
        return default
    value = raw[key]
    if value is None and null:
        return None
    if not _KINDS[kind](value):
        raise CurationFileError(f"{where}.{key}: expected {kind}, not {value!r:.80}")
    return value


def _moment(value: str, where: str) -> datetime:
    try:
        moment = parse_datetime(value)
    except ValueError:
        moment = None
    if moment is None:
        raise CurationFileError(f"{where}: expected an ISO 8601 date and time, not {value!r:.80}")
    return timezone.make_aware(moment, UTC) if timezone.is_naive(moment) else moment


def _hardware_read(raw) -> tuple[str, dict]:
    if not isinstance(raw, dict):
        raise CurationFileError("hardware: expected an object with the hardware's slug")
    slug = _field(raw, "slug", "hardware", "a string")
    if not SLUG_PATTERN.match(slug):
        raise CurationFileError(
            f"hardware.slug: {slug!r:.80} is not a hardware slug (lowercase letters, digits, -)"
        )
    fields = {}
    for name in HARDWARE_FIELDS:
        if raw.get(name) is None:
            continue
        value, model_field = raw[name], Hardware._meta.get_field(name)
        internal = model_field.get_internal_type()
        if internal == "JSONField":
            expected = type(model_field.get_default())
            ok = isinstance(value, expected)
            kind = "a list" if expected is list else "an object"
        elif internal == "FloatField":
            ok, kind = _is_number(value), "a finite number"
        elif internal.endswith("IntegerField"):
            ok, kind = _is_integer(value) and value >= 0, "a whole number, 0 or more"
        else:
            choices = [choice for choice, _ in model_field.flatchoices]
            ok = isinstance(value, str) and len(value) <= model_field.max_length
            ok = ok and (not choices or value in choices)
            kind = f"a string of at most {model_field.max_length} characters"
            if choices:
                kind = f"one of {', '.join(choices)}"
        if not ok:
            raise CurationFileError(f"hardware.{name}: expected {kind}, not {value!r:.80}")
        fields[name] = value
    return slug, fields


def _validation_read(raw, where: str) -> _ValidationEntry | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise CurationFileError(f"{where}: expected an object or null")
    status = _field(raw, "status", where, "a string")
    if status not in Validation.FINISHED:
        raise CurationFileError(
            f"{where}.status: {status!r:.80} is not a finished status (passed, flagged, failed)"
        )
    findings = _field(raw, "findings", where, "a list", default=[])
    for index, finding in enumerate(findings):
        here = f"{where}.findings[{index}]"
        if not isinstance(finding, dict):
            raise CurationFileError(f"{here}: expected an object with a code and a message")
        _field(finding, "code", here, "a string")
        _field(finding, "message", here, "a string")
    # The status the runner's Validation.finish gives these findings must be the file's.
    if status != Validation.Status.FAILED and (status == Validation.Status.FLAGGED) != bool(
        findings
    ):
        raise CurationFileError(
            f"{where}: a {status} validation with {len(findings)} findings (passed has none, "
            "flagged has some)"
        )
    memory = _field(raw, "peak_memory_bytes", where, "an integer", default=None, null=True)
    if memory is not None and memory < 0:
        raise CurationFileError(f"{where}.peak_memory_bytes: below 0")
    reference_ms = _field(raw, "reference_ms", where, "a finite number", default=None, null=True)
    return _ValidationEntry(
        status=status,
        findings=findings,
        peak_memory_bytes=memory,
        reference_ms=None if reference_ms is None else float(reference_ms),
        details=_field(raw, "details", where, "an object", default={}),
        error=_field(raw, "error", where, "a string", default=""),
        environment=_field(raw, "environment", where, "an object", default={}),
        finished_at=_moment(_field(raw, "finished_at", where, "a string"), f"{where}.finished_at"),
    )


def _baseline_read(raw, where: str) -> _BaselineEntry:
    if not isinstance(raw, dict):
        raise CurationFileError(f"{where}: expected an object")
    mode = _field(raw, "mode", where, "a string")
    if mode not in Baseline.Mode.values:
        raise CurationFileError(f"{where}.mode: {mode!r:.80} is not eager or compile")
    stats = _field(raw, "stats", where, "an object", default={})
    median = _field(raw, "median_ms", where, "a finite number", default=None)
    in_stats = _field(stats, "median_ms", f"{where}.stats", "a finite number", default=None)
    if median is None:
        median = in_stats
    if median is None:
        raise CurationFileError(f"{where}: no median_ms")
    if in_stats is not None and in_stats != median:
        raise CurationFileError(f"{where}: median_ms {median} differs from stats' {in_stats}")
    if median <= 0:
        raise CurationFileError(f"{where}.median_ms: expected a positive time, not {median}")
    torch_version = _field(raw, "torch_version", where, "a string", default="")
    if len(torch_version) > Baseline._meta.get_field("torch_version").max_length:
        raise CurationFileError(f"{where}.torch_version: too long")
    created_at = _field(raw, "created_at", where, "a string", default=None, null=True)
    return _BaselineEntry(
        mode=mode,
        stats={**stats, "median_ms": median},
        torch_version=torch_version,
        environment=_field(raw, "environment", where, "an object", default={}),
        created_at=None if created_at is None else _moment(created_at, f"{where}.created_at"),
    )


def _problem_read(raw, where: str) -> _ProblemEntry:
    if not isinstance(raw, dict):
        raise CurationFileError(f"{where}: expected an object")
    slug = _field(raw, "slug", where, "a string")
    where = f"{where} ({slug:.200})"
    _field(raw, "level", where, "an integer", default=None)
    source_hash = _field(raw, "source_hash", where, "a string")
    entries = _field(raw, "baselines", where, "a list", default=[])
    baselines = [_baseline_read(b, f"{where}.baselines[{i}]") for i, b in enumerate(entries)]
    modes = [b.mode for b in baselines]
    if len(set(modes)) != len(modes):
        raise CurationFileError(f"{where}.baselines: a mode given twice")
    return _ProblemEntry(
        slug=slug,
        source_hash=source_hash,
        validation=_validation_read(raw.get("validation"), f"{where}.validation"),
        baselines=baselines,
    )


def _curation_read(data) -> tuple[str, dict, list[_ProblemEntry]]:
    """The whole file checked, before anything is stored."""
    if not isinstance(data, dict) or data.get("format") != CURATION_FORMAT:
        raise CurationFileError(f'not a curation file (expected "format": "{CURATION_FORMAT}")')
    version = data.get("version")
    if not _is_integer(version) or version != CURATION_VERSION:
        raise CurationFileError(
            f"curation file version {version!r:.40}: this site reads version {CURATION_VERSION}"
        )
    slug, fields = _hardware_read(data.get("hardware"))
    raw_problems = data.get("problems")
    if not isinstance(raw_problems, list):
        raise CurationFileError("problems: expected a list")
    problems = [_problem_read(raw, f"problems[{i}]") for i, raw in enumerate(raw_problems)]
    slugs = [p.slug for p in problems]
    if len(set(slugs)) != len(slugs):
        twice = sorted({s for s in slugs if slugs.count(s) > 1})
        raise CurationFileError(f"problems: given more than once: {', '.join(twice)}")
    return slug, fields, problems


def curation_import(*, data: dict) -> CurationImport:
    """Store a curation file (`curation_export`'s data) on this site, in one transaction.

    A problem is skipped when this site lacks it or its reference differs from the one measured;
    a validation when this site already has a finished one of that reference on the hardware.
    A baseline replaces the site's figure for its mode unless that is a measured one of the same
    reference at least as recent. Raises CurationFileError, storing nothing, for a malformed file.
    """
    hardware_slug, hardware_fields, entries = _curation_read(data)
    report = CurationImport()
    with transaction.atomic():
        hardware = Hardware.objects.filter(slug=hardware_slug).first()
        if hardware is None:
            hardware = hardware_register(slug=hardware_slug, **hardware_fields)
        problems = Problem.objects.select_related("current_version").in_bulk(
            [entry.slug for entry in entries], field_name="slug"
        )
        for entry in entries:
            problem = problems.get(entry.slug)
            if problem is None:
                report.skipped.append((entry.slug, "no such problem on this site"))
            elif problem.current_version is None:
                report.skipped.append((entry.slug, "the problem has no reference on this site"))
            elif problem.current_version.source_hash != entry.source_hash:
                report.skipped.append(
                    (entry.slug, "the site's reference differs from the one measured")
                )
            else:
                _entry_store(report, entry, problem, hardware)
    return report


def _entry_store(
    report: CurationImport, entry: _ProblemEntry, problem: Problem, hardware: Hardware
) -> None:
    version: ProblemVersion = problem.current_version
    if entry.validation is not None:
        if Validation.objects.filter(
            problem_version=version, hardware=hardware, status__in=Validation.FINISHED
        ).exists():
            report.skipped.append(
                (
                    entry.slug,
                    f"validation: this site already has a finished validation of this reference "
                    f"on {hardware.slug}",
                )
            )
        else:
            _validation_store(entry.validation, version, hardware)
            report.validations.append(entry.slug)
    for baseline in entry.baselines:
        have = Baseline.objects.filter(problem=problem, hardware=hardware, mode=baseline.mode)
        have = have.filter(problem_version=version, source="measured").first()
        if have is not None and baseline.created_at and have.created_at >= baseline.created_at:
            report.skipped.append(
                (
                    entry.slug,
                    f"{baseline.mode} baseline: this site has this figure or a more recent one",
                )
            )
            continue
        baseline_record(
            problem=problem,
            hardware=hardware,
            mode=baseline.mode,
            stats=baseline.stats,
            torch_version=baseline.torch_version,
            source="measured",
            problem_version=version,
            environment=baseline.environment,
            measured_at=baseline.created_at,
        )
        report.baselines.append(f"{entry.slug} {baseline.mode}")


def _validation_store(
    entry: _ValidationEntry, version: ProblemVersion, hardware: Hardware
) -> Validation:
    validation = Validation.objects.create(
        problem_version=version, hardware=hardware, requested_by=None, runner_name=""
    )
    validation.record(
        findings=entry.findings,
        failed=entry.status == Validation.Status.FAILED,
        peak_memory_bytes=entry.peak_memory_bytes,
        reference_ms=entry.reference_ms,
        details=entry.details,
        error=entry.error,
        environment=entry.environment,
        # When it was measured, not when it arrived here: the latest validation is found by it.
        finished_at=entry.finished_at,
    )
    validation_settle(validation=validation)
    return validation
