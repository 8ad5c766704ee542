"""Flow 5 end to end: a run through the real "generation" queue and a real cpu runner.

The model is litellm's mock_response, chosen per step from a canned-answers file that the
generation worker reads (LLM_MOCK_RESPONSES_FILE): correct, wrong, no-code and failing answers,
and a rate limit that is retried.
"""

import pytest

from submissions.models import Evaluation, Submission
from submissions.runs import selectors as run_selectors
from submissions.runs import services as run_services
from submissions.runs.models import Generation, Run
from tests.conftest import wait_for
from tests.runs_support import (
    ADD_CORRECT,
    GELU_RUNTIME_ERROR,
    NO_CODE,
    RELU_CORRECT,
    RELU_WRONG,
    SOFTMAX_WRONG,
    write_answers,
)

# Fixtures shared by the run tests: llm_model, start_generation_cluster.
pytest_plugins = ["tests.runs_support"]

pytestmark = pytest.mark.django_db(transaction=True)

RELU = "level1/901_Small_ReLU"
MATMUL = "level1/902_Small_Matmul"
SOFTMAX = "level1/903_Small_Softmax"
ADD = "level1/904_Small_Add"
GELU = "level2/901_Small_Linear_GELU"


def settled(run: Run) -> bool:
    """Finished generating, and every submission it made is evaluated."""
    run.refresh_from_db()
    return run.status == Run.Status.FINISHED and not run.submissions.exclude(
        status=Submission.Status.FINISHED
    ).exists()


def verdict_of(run: Run, slug: str, turn: int = 0) -> str:
    return run.generations.get(problem__slug=slug, turn=turn).submission.verdict


def test_a_whole_run_is_generated_evaluated_and_scored(
    llm_model, cpu_hardware, sample_problems, start_generation_cluster, start_runner, tmp_path
):
    """Slow: the generation cluster and a runner as real processes, each run step's tasks crossing
    between them through the real queue."""
    answers = write_answers(tmp_path / "answers.json", {
        RELU: RELU_CORRECT,
        ADD: [{"raise": "rate_limit", "message": "429 slow down"}, ADD_CORRECT],
        SOFTMAX: SOFTMAX_WRONG,
        MATMUL: NO_CODE,
        GELU: GELU_RUNTIME_ERROR,
    })
    run = run_services.run_create(
        model=llm_model, problems=[RELU, MATMUL, SOFTMAX, ADD, GELU], backend="torch",
        hardware=cpu_hardware,
    )
    run_services.run_start(run=run)
    start_generation_cluster(answers=answers)
    start_runner()
    wait_for(lambda: settled(run), timeout=480, interval=1)

    statuses = dict(run.generations.values_list("problem__slug", "status"))
    assert statuses == {
        RELU: "done", ADD: "done", SOFTMAX: "done", MATMUL: "no_code", GELU: "done"
    }
    assert run.generations.get(problem__slug=ADD).attempts == 2  # the rate limit, then the answer
    assert run.generations.get(problem__slug=MATMUL).response == NO_CODE
    assert {slug: verdict_of(run, slug) for slug in (RELU, ADD, SOFTMAX, GELU)} == {
        RELU: "correct", ADD: "correct", SOFTMAX: "incorrect", GELU: "runtime_error"
    }
    assert run.submissions.count() == 4
    assert set(run.submissions.values_list("model", flat=True)) == {llm_model.pk}

    generations = list(run.generations.all())
    assert run.prompt_tokens == sum(g.prompt_tokens for g in generations) > 0
    assert run.completion_tokens == sum(g.completion_tokens for g in generations) > 0
    assert run.cost_usd == pytest.approx(sum(g.cost_usd for g in generations))
    assert run.cost_usd > 0

    # fast_p: every problem of a level counts in the denominator.
    evaluation = {
        slug: Evaluation.objects.get(submission__run=run, submission__problem__slug=slug)
        for slug in (RELU, ADD)
    }
    level1, level2 = run_selectors.run_fast_p(run)
    assert (level1.level, level1.problems, level1.correct) == (1, 4, 2)
    assert level1.fast_p[0.0] == 2 / 4
    for p, share in level1.fast_p.items():
        faster = sum(1 for slug in (RELU, ADD) if evaluation[slug].speedup > p)
        assert share == faster / 4, p
    assert (level2.level, level2.problems, level2.correct) == (2, 1, 0)
    assert level2.fast_p[0.0] == 0.0

    progress = run_selectors.run_progress(run)
    assert (progress["generated"], progress["evaluated"], progress["correct"]) == (5, 4, 2)


def test_a_refinement_turn_follows_the_evaluation_of_the_first(
    llm_model, cpu_hardware, sample_problems, start_generation_cluster, start_runner, tmp_path
):
    """Slow: a refinement turn waits on a real runner's evaluation in another process before the
    generation cluster asks again."""
    answers = write_answers(tmp_path / "answers.json", {
        f"{RELU}#turn0": RELU_WRONG,
        f"{RELU}#turn1": RELU_CORRECT,
    })
    run = run_services.run_create(
        model=llm_model, problems=[RELU], backend="torch", hardware=cpu_hardware,
        refinement_turns=1,
    )
    run_services.run_start(run=run)
    start_generation_cluster(answers=answers)
    start_runner()
    wait_for(lambda: settled(run), timeout=480, interval=1)

    first, second = run.generations.order_by("turn")
    assert (first.turn, second.turn) == (0, 1)
    assert first.submission.verdict == "incorrect" and second.submission.verdict == "correct"
    # The second prompt carried the first answer and the evaluator's verdict on it.
    assert RELU_WRONG in second.prompt and "Verdict: incorrect" in second.prompt
    assert second.created_at >= first.submission.finished_at
    [level1] = run_selectors.run_fast_p(run)
    assert level1.fast_p[0.0] == 1.0  # the best turn counts
    assert run.generations.filter(status=Generation.Status.PENDING).count() == 0
