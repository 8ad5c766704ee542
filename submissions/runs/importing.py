"""Importing a KernelBench generations folder (level_L_problem_P_sample_S_kernel.py) as a
finished run of the model that generated it: `manage.py import_generations`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from evaluation.models import Hardware
from problems.models import Problem
from submissions.errors import SubmissionError
from submissions.runs.models import Generation, Model, Run
from submissions.runs.services import RunError, run_settings_check
from submissions.services import submission_create
from submissions.sources import decode_source

GENERATION_FILE = re.compile(
    r"^level_(?P<level>\d+)_problem_(?P<number>\d+)_sample_(?P<sample>\d+)_kernel\.py$"
)


@dataclass
class ImportReport:
    run: Run
    imported: int
    skipped: list[tuple[str, str]]  # (file name, why)


def generations_import(
    *,
    folder: Path,
    model_name: str,
    hardware: Hardware,
    backend: str = "cuda",
    precision: str = "fp32",
    name: str = "",
    user=None,
) -> ImportReport:
    """Store a folder of KernelBench generations (level_L_problem_P_sample_S_kernel.py) as a
    finished run of the named model; every file becomes a submission queued for evaluation.

    Files that cannot be imported are listed with the reason and left as they are; nothing is
    stored when no file can be imported.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise RunError(f"{folder} is not a folder.", code="not_a_folder")
    model_name = model_name.strip()
    if not model_name:
        raise RunError("Name the model that generated these kernels.", code="no_model")
    skipped: list[tuple[str, str]] = []
    found: dict[tuple[int, int, int], tuple[str, str]] = {}  # (level, number, sample)
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        match = GENERATION_FILE.match(path.name)
        if not match:
            skipped.append((path.name, "not named level_L_problem_P_sample_S_kernel.py"))
            continue
        key = (int(match["level"]), int(match["number"]), int(match["sample"]))
        if key in found:
            skipped.append((path.name, f"the same sample as {found[key][0]}"))
            continue
        try:
            source = decode_source(path.read_bytes())
        except SubmissionError as error:
            skipped.append((path.name, error.message))
            continue
        if not source.strip():
            skipped.append((path.name, "the file is empty"))
            continue
        found[key] = (path.name, source)
    problems = {
        (p.level, p.number): p
        for p in Problem.objects.filter(
            level__in={k[0] for k in found}, number__in={k[1] for k in found}
        )
    }
    for key in [k for k in found if (k[0], k[1]) not in problems]:
        skipped.append((found.pop(key)[0], f"there is no problem {key[1]} in level {key[0]}"))
    if not found:
        reasons = "; ".join(f"{f}: {why}" for f, why in skipped) or "the folder is empty"
        raise RunError(f"Nothing to import from {folder} ({reasons}).", code="nothing_to_import")

    model = Model.objects.filter(litellm_name=model_name).first()
    run_settings_check(
        model=model or Model(litellm_name=model_name),
        backend=backend,
        hardware=hardware,
        precision=precision,
        samples_per_problem=1,
        temperature=0.0,
        prompt_style=Run.PromptStyle.ONE_SHOT,
        refinement_turns=0,
    )
    now = timezone.now()
    imported = 0
    with transaction.atomic():
        if model is None:
            model = Model.objects.create(litellm_name=model_name, display_name=model_name)
        run = Run.objects.create(
            name=(name.strip() or f"{model_name} (imported from {folder.name})")[:200],
            model=model,
            backend=backend,
            hardware=hardware,
            precision=precision,
            samples_per_problem=max(sample for _, _, sample in found) + 1,
            status=Run.Status.FINISHED,
            created_by=user if user is not None and user.is_authenticated else None,
            finished_at=now,
        )
        run.problems.set({problems[(level, number)] for level, number, _ in found})
        for (level, number, sample), (filename, source) in sorted(found.items()):
            problem = problems[(level, number)]
            try:
                submission = submission_create(
                    user=None,
                    problem=problem,
                    source=source,
                    backend=backend,
                    hardware=hardware,
                    precision=precision,
                    filename=filename,
                    model=model,
                    run=run,
                    sample_index=sample,
                )
            except SubmissionError as error:
                skipped.append((filename, error.message))
                continue
            Generation.objects.create(
                run=run,
                problem=problem,
                sample_index=sample,
                status=Generation.Status.DONE,
                prompt=f"(imported from {filename})",
                response=source,
                submission=submission,
                finished_at=now,
            )
            imported += 1
        if not imported:
            reasons = "; ".join(f"{f}: {why}" for f, why in skipped)
            raise RunError(f"Nothing could be imported ({reasons}).", code="nothing_to_import")
    return ImportReport(run=run, imported=imported, skipped=skipped)
