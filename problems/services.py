"""Problem workflows: importing references as versions, and curation state changes."""

import re
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from problems.models import Problem, ProblemVersion, source_hash

FILENAME_PATTERN = re.compile(r"^(?P<number>\d+)_(?P<name>.+)\.py$")
SAMPLES_DIR = Path(__file__).resolve().parent / "samples"


@dataclass
class ImportOutcome:
    problem: Problem
    created: bool  # a new problem
    new_version: bool  # a new version of its reference (also true when created)


def problem_upsert(
    *,
    level: int,
    number: int,
    name: str,
    source: str,
    origin: str = "",
    publish: bool = False,
) -> ImportOutcome:
    """Create the problem, or add a version when its reference changed; else change nothing."""
    digest = source_hash(source)
    with transaction.atomic():
        problem, created = Problem.objects.select_for_update().get_or_create(
            level=level,
            number=number,
            defaults={"slug": f"level{level}/{number}_{name}", "name": name},
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
            problem.current_version = version
            problem.save(update_fields=["current_version", "updated_at"])
        if publish and problem.status != Problem.Status.PUBLISHED:
            problem.publish()
    return ImportOutcome(problem=problem, created=created, new_version=new_version)


def samples_load() -> list[ImportOutcome]:
    """The small sample problems that ship with kbsite, published, for a fresh site."""
    outcomes = []
    for path in sorted(SAMPLES_DIR.glob("level*/*.py")):
        match = FILENAME_PATTERN.match(path.name)
        if not match:
            continue
        outcomes.append(
            problem_upsert(
                level=int(path.parent.name.removeprefix("level")),
                number=int(match["number"]),
                name=match["name"],
                source=path.read_text(encoding="utf-8"),
                origin=f"samples/{path.parent.name}/{path.name}",
                publish=True,
            )
        )
    return outcomes
