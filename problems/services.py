"""Problem workflows: importing references as versions, and curation state changes."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from problems.importing import FILENAME_PATTERN, check_reference, name_tags, read_problems
from problems.models import Problem, ProblemVersion, PublishRefused, Tag, source_hash

SAMPLES_DIR = Path(__file__).resolve().parent / "samples"


@dataclass
class ImportOutcome:
    problem: Problem
    created: bool  # a new problem
    new_version: bool  # a new version of its reference (also true when created)
    published: bool = False  # published by this call
    publish_refused: bool = False  # asked to publish, but validation findings stand in the way


def problem_upsert(
    *,
    level: int,
    number: int,
    name: str,
    source: str,
    origin: str = "",
    publish: bool = False,
    description: str = "",
    tags: Iterable[str] = (),
) -> ImportOutcome:
    """Create the problem, or add a version when its reference changed; else change nothing.

    Evaluations and submissions point at the version they ran on, so an old version is never
    changed or deleted.
    """
    digest = source_hash(source)
    published = refused = False
    with transaction.atomic():
        problem, created = Problem.objects.select_for_update().get_or_create(
            level=level,
            number=number,
            defaults={
                "slug": f"level{level}/{number}_{name}",
                "name": name,
                "description": description,
            },
        )
        current = problem.current_version
        new_version = current is None or current.source_hash != digest
        if new_version:
            version = ProblemVersion.objects.create(
                problem=problem,
                version=(current.version + 1) if current else 1,
                source=source,
                source_hash=digest,
                origin=origin,
            )
            problem.set_current_version(version)
        if description and not problem.description:
            problem.description = description
            problem.save(update_fields=["description", "updated_at"])
        for tag_name in tags:
            tag, _ = Tag.objects.get_or_create(name=tag_name)
            problem.tags.add(tag)
        if publish and problem.status not in (Problem.Status.PUBLISHED, Problem.Status.RETIRED):
            try:
                problem.publish()
                published = True
            except PublishRefused:
                refused = True
    return ImportOutcome(
        problem=problem,
        created=created,
        new_version=new_version,
        published=published,
        publish_refused=refused,
    )


@dataclass
class ImportReport:
    created: list[str] = field(default_factory=list)
    new_versions: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=list)
    publish_refused: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file or row, why)

    @property
    def imported(self) -> int:
        return len(self.created) + len(self.new_versions) + len(self.unchanged)


def problems_import(
    *,
    path: Path,
    levels: Iterable[int] = (),
    publish: bool = False,
    tags: Iterable[str] = (),
) -> ImportReport:
    """Import a KernelBench folder or the dataset's files (parquet, JSON lines) as problems.

    Files are read as text and checked with `ast`, never run. A bad file is reported by name
    and skipped; the rest import. Importing the same files again changes nothing.
    Raises ImportSourceError when `path` is neither kind.
    """
    report = ImportReport()
    tags = [tag.strip() for tag in tags if tag.strip()]
    seen: dict[tuple[int, int], str] = {}
    for candidate in read_problems(Path(path), set(levels) or None):
        if candidate.error:
            report.skipped.append((candidate.label, candidate.error))
            continue
        key = (candidate.level, candidate.number)
        if key in seen:
            report.skipped.append(
                (candidate.label, f"problem number {candidate.number} is also {seen[key]}")
            )
            continue
        seen[key] = candidate.label
        outcome = problem_upsert(
            level=candidate.level,
            number=candidate.number,
            name=candidate.name,
            source=candidate.source,
            origin=candidate.origin,
            publish=publish,
            description=candidate.description,
            tags=[*tags, *name_tags(candidate.name)],
        )
        slug = outcome.problem.slug
        if outcome.created:
            report.created.append(slug)
        elif outcome.new_version:
            report.new_versions.append(slug)
        else:
            report.unchanged.append(slug)
        if outcome.published:
            report.published.append(slug)
        if outcome.publish_refused:
            report.publish_refused.append(slug)
    return report


def samples_load() -> list[ImportOutcome]:
    """The small sample problems that ship with kbsite, published, for a fresh site."""
    outcomes = []
    for path in sorted(SAMPLES_DIR.glob("level*/*.py")):
        match = FILENAME_PATTERN.match(path.name)
        if not match:
            continue
        source = path.read_text(encoding="utf-8")
        outcomes.append(
            problem_upsert(
                level=int(path.parent.name.removeprefix("level")),
                number=int(match["number"]),
                name=match["name"],
                source=source,
                origin=f"samples/{path.parent.name}/{path.name}",
                publish=True,
                description=check_reference(source)[1],
                tags=name_tags(match["name"]),
            )
        )
    return outcomes
