"""Importing a KernelBench generations folder as a run of a named model, then evaluating it (a
runner's worker in this process, the stand-in harness in place of the sandboxed child)."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils.module_loading import import_string

from submissions.models import Submission
from submissions.runs.models import Generation, Model, Run
from tests.conftest import kernel_source, take_queued_tasks

RELU_CORRECT = kernel_source("relu_correct.py")
RELU_WRONG = kernel_source("relu_wrong.py")
ADD_CORRECT = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.add(a, b)
"""


def import_folder(folder, *extra: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("import_generations", str(folder), "--model", "kevin-32b", "--hardware", "cpu",
                 "--backend", "torch", *extra, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db(transaction=True)
def test_an_imported_folder_becomes_a_run_whose_samples_are_evaluated(
    cpu_hardware, sample_problems, harness, settings, monkeypatch, tmp_path
):
    folder = tmp_path / "kevin_level1"
    folder.mkdir()
    (folder / "level_1_problem_901_sample_0_kernel.py").write_text(RELU_CORRECT)
    (folder / "level_1_problem_901_sample_1_kernel.py").write_text(RELU_WRONG)
    (folder / "level_1_problem_904_sample_0_kernel.py").write_text(ADD_CORRECT)
    (folder / "level_1_problem_999_sample_0_kernel.py").write_text(RELU_CORRECT)
    (folder / "eval_results.json").write_text("{}")

    out, err = import_folder(folder, "--name", "Kevin, level 1")
    assert "imported 3 sample(s)" in out
    assert "level_1_problem_999_sample_0_kernel.py: there is no problem 999 in level 1" in err
    assert "eval_results.json: not named" in err

    run = Run.objects.get()
    assert (run.name, run.model.litellm_name, run.status) == (
        "Kevin, level 1", "kevin-32b", Run.Status.FINISHED
    )
    assert run.samples_per_problem == 2
    assert sorted(run.problems.values_list("slug", flat=True)) == [
        "level1/901_Small_ReLU", "level1/904_Small_Add"
    ]
    assert run.generations.filter(status=Generation.Status.DONE).count() == 3

    # A runner's worker takes the queued evaluations; the stand-in harness judges each sample
    # as the real one would (the wrong ReLU incorrect).
    settings.REVERIFY_NEW_RECORDS = False  # as the real runners of the tests have it
    monkeypatch.setenv("KBSITE_RUNNER_NAME", "worker:1")
    for task in take_queued_tasks("cpu"):
        source = Submission.objects.get(pk=task["args"][0]).source
        harness.will_return(verdict="incorrect" if source == RELU_WRONG else "correct")
        import_string(task["func"])(*task["args"], **task["kwargs"])
    assert not run.submissions.exclude(status=Submission.Status.FINISHED).exists()
    verdicts = {
        (s.problem.slug, s.sample_index): s.verdict
        for s in run.submissions.select_related("problem")
    }
    assert verdicts == {
        ("level1/901_Small_ReLU", 0): "correct",
        ("level1/901_Small_ReLU", 1): "incorrect",
        ("level1/904_Small_Add", 0): "correct",
    }
    assert all(s.model_id == run.model_id for s in run.submissions.all())
    # Sample 0 of each problem is scored: both correct.
    from submissions.runs.selectors import run_fast_p

    [level1] = run_fast_p(run)
    assert (level1.problems, level1.correct, level1.fast_p[0.0]) == (2, 2, 1.0)


@pytest.mark.django_db
def test_a_folder_with_nothing_to_import_stores_nothing_and_says_why(
    cpu_hardware, sample_problems, tmp_path
):
    (tmp_path / "level_1_problem_999_sample_0_kernel.py").write_text(RELU_CORRECT)
    (tmp_path / "level_1_problem_901_sample_0_kernel.py").write_bytes(b"\xff\xfe not text")
    with pytest.raises(CommandError) as error:
        import_folder(tmp_path)
    assert "no problem 999" in str(error.value) and "not UTF-8" in str(error.value)
    assert not Run.objects.exists() and not Model.objects.exists()


@pytest.mark.django_db
def test_a_missing_folder_or_unknown_hardware_is_a_clear_error(cpu_hardware, tmp_path):
    with pytest.raises(CommandError, match="is not a folder"):
        import_folder(tmp_path / "missing")
    with pytest.raises(CommandError, match="No hardware 'h100'"):
        call_command("import_generations", str(tmp_path), "--model", "m", "--hardware", "h100")


@pytest.mark.django_db
def test_an_existing_model_is_reused_and_two_files_for_one_sample_are_refused(
    cpu_hardware, sample_problems, tmp_path
):
    model = Model.objects.create(litellm_name="kevin-32b", display_name="Kevin 32B")
    (tmp_path / "level_1_problem_901_sample_0_kernel.py").write_text(RELU_CORRECT)
    (tmp_path / "level_1_problem_0901_sample_0_kernel.py").write_text(RELU_WRONG)
    out, err = import_folder(tmp_path)
    assert "imported 1 sample(s)" in out and "the same sample as" in err
    assert Run.objects.get().model == model and Model.objects.count() == 1
