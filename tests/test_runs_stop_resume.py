"""Stopping a run and resuming it, through the real "generation" queue: nothing finished is
asked of the model again, and the rest is."""

import pytest
from django_q.models import OrmQ

from submissions.runs import services as run_services
from submissions.runs.models import Generation, Run
from tests.conftest import wait_for
from tests.runs_support import (
    RELU_CORRECT,
    write_answers,
)

# Fixtures shared by the run tests: llm_model, start_generation_cluster.
pytest_plugins = ["tests.runs_support"]

pytestmark = pytest.mark.django_db(transaction=True)

PROBLEMS = [
    "level1/901_Small_ReLU",
    "level1/902_Small_Matmul",
    "level1/903_Small_Softmax",
    "level1/904_Small_Add",
    "level2/901_Small_Linear_GELU",
]


def finished_steps(run: Run) -> dict[int, tuple]:
    return {
        g.pk: (g.status, g.attempts, g.submission_id, g.response, g.finished_at, g.cost_usd)
        for g in run.generations.exclude(status=Generation.Status.PENDING)
    }


def quiet(run: Run) -> bool:
    """No step in flight (claimed, not stored) and nothing left on the generation queue."""
    in_flight = run.generations.filter(status=Generation.Status.PENDING, attempts__gt=0)
    return not in_flight.exists() and not OrmQ.objects.filter(key="generation").exists()


def test_a_stopped_run_resumes_without_redoing_a_finished_step(
    llm_model, cpu_hardware, sample_problems, start_generation_cluster, tmp_path
):
    # Each answer takes a second and a half, one at a time, so the stop lands mid-run.
    """Slow: the generation cluster is a real process, stopped mid-run and started again."""
    answers = write_answers(tmp_path / "answers.json",
                            {"*": {"answer": RELU_CORRECT, "delay": 1.5}})
    run = run_services.run_create(model=llm_model, problems=PROBLEMS, backend="torch",
                                  hardware=cpu_hardware)
    run_services.run_start(run=run)
    start_generation_cluster(answers=answers, workers=1)

    wait_for(lambda: run.generations.filter(status=Generation.Status.DONE).exists(), timeout=120)
    run_services.run_stop(run=run)
    wait_for(lambda: quiet(run), timeout=120)
    run.refresh_from_db()
    assert run.status == Run.Status.STOPPED
    before = finished_steps(run)
    assert 1 <= len(before) < len(PROBLEMS), "the stop should land mid-run"
    tokens_before = run.completion_tokens
    untouched = run.generations.filter(status=Generation.Status.PENDING)
    assert all(g.attempts == 0 for g in untouched)  # queued steps never asked the model

    run_services.run_resume(run=run)
    wait_for(lambda: Run.objects.get(pk=run.pk).status == Run.Status.FINISHED, timeout=120)
    run.refresh_from_db()

    after = finished_steps(run)
    assert len(after) == len(PROBLEMS)
    assert {pk: after[pk] for pk in before} == before  # finished steps are exactly as they were
    # One call per step in all: tokens grew only by the steps that were left.
    generations = list(run.generations.all())
    assert [g.attempts for g in generations] == [1] * len(PROBLEMS)
    per_call = generations[0].completion_tokens
    assert run.completion_tokens == per_call * len(PROBLEMS)
    assert run.completion_tokens - tokens_before == per_call * (len(PROBLEMS) - len(before))
    for slug in PROBLEMS:
        assert run.submissions.filter(problem__slug=slug).count() == 1
