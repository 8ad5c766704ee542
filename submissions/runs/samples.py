"""A run's samples, counted as their results land.

A run's tables read every sample's result: read from the evaluations, that was 80 ms for a run
of 3,000 samples, on every view after each new result. Each sample's result is kept instead
(RunSample), recounted from its few submissions when one of their results lands
(`run_sample_refresh`, called where a result is stored); `run_samples_rebuild` recounts them all.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db import transaction

from evaluation import scoring
from submissions.models import Evaluation, Submission
from submissions.runs.models import Run, RunSample

# An evaluation of a run's submission: its scoring row, and where the submission sits in its run.
RUN_ROW_FIELDS = (*scoring.ROW_FIELDS, "submission__run_id", "submission__sample_index")


def sample_fields(results: list[dict]) -> dict:
    """RunSample's fields from the results of one sample's submissions (scoring rows, in
    submission order): the best of them (scoring.best_of_key; the first on a tie) as each
    counting counts it."""
    best = results[0]
    for result in results[1:]:
        if scoring.best_of_key(result) > scoring.best_of_key(best):
            best = result
    fields = {
        "evaluation_id": best["id"],
        "compiled": scoring.compiled(best),
        "correct_submissions": sum(1 for result in results if scoring.on_board(result)),
    }
    for counting, prefix in (("strict", ""), ("kernelbench", "kernelbench_")):
        fields[f"{prefix}correct"] = scoring.counted(best, counting)
        for baseline in scoring.BASELINES:
            fields[f"{prefix}speedup_{baseline}"] = scoring.counted_speedup(
                best, baseline, counting
            )
    return fields


def samples_of(
    rows: Iterable[dict], *, hardware_of: dict[int, int]
) -> dict[tuple[int, int, int], dict]:
    """RunSample's fields per (run, problem, sample index), from evaluation rows (RUN_ROW_FIELDS)
    ordered by submission, latest first: a submission's result is its latest evaluation on its
    run's hardware (`hardware_of`: run id to hardware id), whatever its purpose, as
    latest_evaluations has it. Plain values in and out: the migration that added RunSample
    fills it with this too."""
    latest: dict[int, dict] = {}
    for row in rows:
        if row["hardware_id"] == hardware_of.get(row["submission__run_id"]):
            latest.setdefault(row["submission_id"], row)
    by_sample: dict[tuple[int, int, int], list[dict]] = defaultdict(list)
    for row in latest.values():
        sample = (row["submission__run_id"], row["submission__problem_id"],
                  row["submission__sample_index"])
        by_sample[sample].append(row)
    return {sample: sample_fields(results) for sample, results in by_sample.items()}


def run_sample_refresh(*, submission: Submission) -> None:
    """A result of this submission landed, or its re-verification decided it: if it is a run's,
    recount its sample from the results of the sample's submissions (one a turn)."""
    if submission.run_id is None:
        return
    sample = {"run_id": submission.run_id, "problem_id": submission.problem_id,
              "sample_index": submission.sample_index}
    hardware_id = Run.objects.values_list("hardware_id", flat=True).get(pk=submission.run_id)
    # The sample's submissions first (the run's index), then their evaluations (theirs).
    ids = list(Submission.objects.filter(**sample).values_list("pk", flat=True))
    rows = (
        Evaluation.objects.filter(submission_id__in=ids)
        .order_by("submission_id", "-finished_at", "-id")
        .values(*RUN_ROW_FIELDS)
    )
    fields = samples_of(rows, hardware_of={submission.run_id: hardware_id}).get(
        (submission.run_id, submission.problem_id, submission.sample_index)
    )
    if fields is None:
        RunSample.objects.filter(**sample).delete()
        return
    RunSample.objects.update_or_create(**sample, defaults=fields)


def run_samples_rebuild(*, run: Run | None = None) -> int:
    """Recount every sample of every run (or of one) from the evaluations, if the kept ones
    are ever in doubt. Returns how many were written."""
    runs = Run.objects.all() if run is None else Run.objects.filter(pk=run.pk)
    written = 0
    for run_id, hardware_id in runs.values_list("pk", "hardware_id"):
        rows = (
            Evaluation.objects.filter(submission__run_id=run_id)
            .order_by("submission_id", "-finished_at", "-id")
            .values(*RUN_ROW_FIELDS)
        )
        samples = [
            RunSample(run_id=run_id, problem_id=problem_id, sample_index=index, **fields)
            for (_, problem_id, index), fields in samples_of(
                rows.iterator(chunk_size=2000), hardware_of={run_id: hardware_id}
            ).items()
        ]
        with transaction.atomic():
            RunSample.objects.filter(run_id=run_id).delete()
            RunSample.objects.bulk_create(samples, batch_size=2000)
        written += len(samples)
    return written
