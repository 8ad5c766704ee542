"""`manage.py run_model`: create and start a run, stop and resume it, with clear errors."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from submissions.runs.models import Generation, Run
from tests.runs_support import MODEL_NAME

# Fixtures shared by the run tests: llm_model, start_generation_cluster.
pytest_plugins = ["tests.runs_support"]

pytestmark = pytest.mark.django_db


def run_model(*args: str) -> str:
    out = StringIO()
    call_command("run_model", *args, stdout=out)
    return out.getvalue()


def test_it_creates_and_starts_a_run_over_a_level(llm_model, cpu_hardware, sample_problems):
    out = run_model("--model", MODEL_NAME, "--level", "2", "--hardware", "cpu",
                    "--backend", "torch", "--samples", "2", "--name", "level 2 smoke")
    run = Run.objects.get()
    assert f"run {run.pk} (level 2 smoke) is running" in out
    assert run.samples_per_problem == 2 and set(run.problems.values_list("level", flat=True)) == {2}
    assert run.generations.filter(status=Generation.Status.PENDING).count() == (
        2 * run.problems.count()
    )


def test_it_stops_and_resumes_a_run(llm_model, cpu_hardware, sample_problems):
    run_model("--model", MODEL_NAME, "--problem", "level1/901_Small_ReLU", "--hardware", "cpu",
              "--backend", "torch")
    run = Run.objects.get()
    assert "is stopped" in run_model("--stop", str(run.pk))
    with pytest.raises(CommandError, match="it cannot be stopped"):
        run_model("--stop", str(run.pk))
    assert "is running" in run_model("--resume", str(run.pk))


def test_it_creates_a_pending_run_with_no_start(llm_model, cpu_hardware, sample_problems):
    assert "is pending" in run_model("--model", MODEL_NAME, "--level", "1", "--hardware", "cpu",
                                     "--backend", "torch", "--no-start")
    assert Run.objects.get().generations.count() == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "nobody/nothing", "--level", "1", "--hardware", "cpu"],
         f"No model 'nobody/nothing' is registered (known: {MODEL_NAME})"),
        (["--model", MODEL_NAME, "--level", "1", "--hardware", "h100"], "No hardware 'h100'"),
        (["--model", MODEL_NAME, "--hardware", "cpu", "--backend", "torch"],
         "Choose the problems"),
        (["--model", MODEL_NAME, "--level", "1", "--hardware", "cpu", "--backend", "fortran"],
         "Allowed: cuda, triton, torch, cpp"),
        (["--level", "1"], "--model and --hardware are required"),
        (["--stop", "999999"], "There is no run 999999"),
    ],
)
def test_bad_arguments_are_clear_errors_and_create_nothing(
    llm_model, cpu_hardware, sample_problems, args, message
):
    with pytest.raises(CommandError) as error:
        run_model(*args)
    assert message in str(error.value)
    assert not Run.objects.exists()
