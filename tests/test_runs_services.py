"""submissions.runs.services: creating, starting, stopping and resuming runs; one step at a time.

Steps run here in the test process, on litellm's mock_response; tests/test_runs_flow.py runs
whole runs through the real queues.
"""

import pytest

from problems.models import Problem, Tag
from submissions.models import Submission
from submissions.runs import selectors as run_selectors
from submissions.runs import services as run_services
from submissions.runs.llm import MOCK_FILE_ENV
from submissions.runs.models import Generation, Run
from tests.runs_support import (
    NO_CODE,
    RELU_CORRECT,
    RELU_WRONG,
    finish_evaluation,
    queued_tasks,
    write_answers,
)

# Fixtures shared by the run tests: llm_model, start_generation_cluster.
pytest_plugins = ["tests.runs_support"]

RELU = "level1/901_Small_ReLU"
ADD = "level1/904_Small_Add"
GELU = "level2/901_Small_Linear_GELU"


@pytest.fixture
def answers(tmp_path, monkeypatch, settings):
    """Canned answers for steps run in this process; retries wait a millisecond."""
    settings.LLM_RETRY_BASE_SECONDS = 0.001

    def use(table: dict) -> None:
        monkeypatch.setenv(MOCK_FILE_ENV, str(write_answers(tmp_path / "answers.json", table)))

    return use


def make_run(llm_model, cpu_hardware, **overrides) -> Run:
    values = {"problems": [RELU], "backend": "torch", "hardware": cpu_hardware}
    values.update(overrides)
    return run_services.run_create(model=llm_model, **values)


def step(generation: Generation) -> str:
    generation.refresh_from_db()
    return run_services.generation_step(generation_id=generation.pk, attempts=generation.attempts)


def generation_tasks() -> list[tuple]:
    return [task["args"] for task in queued_tasks(run_services.GENERATION_QUEUE)
            if task["func"] == "submissions.runs.tasks.generate"]


# ---- choosing problems and settings ----------------------------------------------------------


def test_a_run_by_level_covers_the_published_problems_of_that_level(
    llm_model, cpu_hardware, sample_problems
):
    retired = sample_problems["level1/902_Small_Matmul"]
    retired.retire()
    run = make_run(llm_model, cpu_hardware, problems=None, level=1)
    expected = Problem.objects.filter(level=1, status=Problem.Status.PUBLISHED)
    assert set(run.problems.all()) == set(expected)
    assert retired not in run.problems.all()
    assert run.status == Run.Status.PENDING and run.generations.count() == 0


def test_a_run_by_tag_covers_the_tagged_problems(llm_model, cpu_hardware, sample_problems):
    # A tag of the test's own: the samples come with tags derived from their names.
    tag = Tag.objects.create(name="chosen-for-this-run")
    for slug in (RELU, ADD):
        sample_problems[slug].tags.add(tag)
    run = make_run(llm_model, cpu_hardware, problems=None, tag="chosen-for-this-run")
    assert sorted(run.problems.values_list("slug", flat=True)) == sorted([RELU, ADD])


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"problems": None}, "no_problems"),
        ({"problems": [RELU, "level1/0_Nothing"]}, "unknown_problem"),
        ({"problems": None, "tag": "no-such-tag"}, "unknown_tag"),
        ({"problems": [GELU], "level": 1}, "no_problems"),
        ({"backend": "fortran"}, "unknown_backend"),
        ({"precision": "fp8"}, "unknown_precision"),
        ({"samples_per_problem": 0}, "bad_samples"),
        ({"temperature": 2.5}, "bad_temperature"),
        ({"refinement_turns": 11}, "bad_turns"),
        ({"prompt_style": "haiku"}, "unknown_prompt_style"),
        ({"prompt_style": "triton", "backend": "torch"}, "unknown_prompt_style"),
    ],
)
def test_bad_run_settings_are_refused_with_a_clear_error_and_store_nothing(
    llm_model, cpu_hardware, sample_problems, overrides, code
):
    with pytest.raises(run_services.RunError) as error:
        make_run(llm_model, cpu_hardware, **overrides)
    assert error.value.code == code and error.value.message
    assert Run.objects.count() == 0


def test_a_backend_the_hardware_does_not_run_is_refused(llm_model, cpu_hardware, sample_problems):
    cpu_hardware.backends = ["torch", "cpp"]
    cpu_hardware.save()
    with pytest.raises(run_services.RunError) as error:
        make_run(llm_model, cpu_hardware, backend="cuda")
    assert error.value.code == "unknown_backend" and error.value.allowed == ["torch", "cpp"]


def test_retired_problems_and_inactive_models_are_refused(llm_model, cpu_hardware, sample_problems):
    sample_problems[RELU].retire()
    with pytest.raises(run_services.RunError, match="Retired"):
        make_run(llm_model, cpu_hardware)
    llm_model.active = False
    llm_model.save()
    with pytest.raises(run_services.RunError) as error:
        make_run(llm_model, cpu_hardware, problems=[ADD])
    assert error.value.code == "inactive_model"


# ---- starting, steps ---------------------------------------------------------------------------


def test_starting_a_run_queues_one_step_per_problem_and_sample(
    llm_model, cpu_hardware, sample_problems, django_capture_on_commit_callbacks
):
    run = make_run(llm_model, cpu_hardware, problems=[RELU, ADD], samples_per_problem=2)
    with django_capture_on_commit_callbacks(execute=True):
        run_services.run_start(run=run)
    assert run.status == Run.Status.RUNNING
    steps = list(run.generations.values_list("problem__slug", "sample_index", "turn", "status"))
    assert sorted(steps) == sorted([
        (ADD, 0, 0, "pending"), (ADD, 1, 0, "pending"),
        (RELU, 0, 0, "pending"), (RELU, 1, 0, "pending"),
    ])
    assert sorted(generation_tasks()) == sorted((g.pk, 0) for g in run.generations.all())
    with pytest.raises(run_services.RunError) as error:
        run_services.run_start(run=run)
    assert error.value.code == "bad_state"


def test_a_step_stores_the_answer_its_submission_and_what_it_cost(
    llm_model, cpu_hardware, sample_problems, answers, django_capture_on_commit_callbacks
):
    answers({RELU: RELU_CORRECT})
    run = make_run(llm_model, cpu_hardware)
    run_services.run_start(run=run)
    generation = run.generations.get()
    with django_capture_on_commit_callbacks(execute=True):
        assert step(generation) == Generation.Status.DONE
    generation.refresh_from_db()
    assert generation.response == RELU_CORRECT and generation.attempts == 1
    assert "class Model(nn.Module)" in generation.prompt  # the problem is in the prompt
    submission = generation.submission
    assert (submission.model, submission.run, submission.sample_index) == (llm_model, run, 0)
    assert submission.source.startswith("import torch") and "```" not in submission.source
    assert submission.backend == "torch" and submission.status == Submission.Status.QUEUED
    assert [t["args"] for t in queued_tasks("cpu")] == [(submission.pk,)]  # its evaluation
    assert generation.prompt_tokens > 0 and generation.completion_tokens > 0
    assert generation.cost_usd > 0
    run.refresh_from_db()
    assert (run.prompt_tokens, run.completion_tokens, run.cost_usd) == (
        generation.prompt_tokens, generation.completion_tokens, generation.cost_usd
    )
    assert run.status == Run.Status.FINISHED and run.finished_at is not None


def test_an_answer_without_code_is_recorded_not_dropped(
    llm_model, cpu_hardware, sample_problems, answers
):
    answers({RELU: NO_CODE})
    run = make_run(llm_model, cpu_hardware)
    run_services.run_start(run=run)
    generation = run.generations.get()
    assert step(generation) == Generation.Status.NO_CODE
    generation.refresh_from_db()
    assert generation.response == NO_CODE and generation.submission is None
    assert "no Python code block" in generation.error
    assert generation.cost_usd > 0 and Submission.objects.count() == 0


def test_a_rate_limit_is_retried_within_the_step(llm_model, cpu_hardware, sample_problems, answers):
    answers({RELU: [{"raise": "rate_limit"}, {"raise": "rate_limit"}, RELU_CORRECT]})
    run = make_run(llm_model, cpu_hardware)
    run_services.run_start(run=run)
    generation = run.generations.get()
    assert step(generation) == Generation.Status.DONE
    generation.refresh_from_db()
    assert generation.attempts == 3 and generation.submission is not None


def test_a_provider_error_that_retrying_cannot_fix_fails_the_step(
    llm_model, cpu_hardware, sample_problems, answers
):
    answers({RELU: {"raise": "auth", "message": "invalid api key"}})
    run = make_run(llm_model, cpu_hardware)
    run_services.run_start(run=run)
    generation = run.generations.get()
    assert step(generation) == Generation.Status.FAILED
    generation.refresh_from_db()
    assert "invalid api key" in generation.error and generation.attempts == 1
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and run.cost_usd == 0


def test_a_second_copy_of_a_step_never_asks_the_model_again(
    llm_model, cpu_hardware, sample_problems, answers
):
    answers({"*": RELU_CORRECT})
    run = make_run(llm_model, cpu_hardware, problems=[RELU, ADD])  # still running after one
    run_services.run_start(run=run)
    generation = run.generations.get(problem__slug=RELU)
    assert run_services.generation_step(generation_id=generation.pk, attempts=0) == "done"
    # The broker handing the same task out again, or a stale copy from before a resume:
    assert run_services.generation_step(generation_id=generation.pk, attempts=0) == "already done"
    assert Submission.objects.count() == 1


def test_a_copy_that_lost_the_claim_does_not_call_the_model(
    llm_model, cpu_hardware, sample_problems, answers
):
    answers({RELU: RELU_CORRECT})
    run = make_run(llm_model, cpu_hardware)
    run_services.run_start(run=run)
    generation = run.generations.get()
    # Another worker claimed this step (attempts 0 -> 1) and is waiting for the model.
    Generation.objects.filter(pk=generation.pk).update(attempts=1)
    assert run_services.generation_step(generation_id=generation.pk, attempts=0) == "not claimed"
    generation.refresh_from_db()
    assert generation.status == Generation.Status.PENDING and generation.response == ""


def test_a_step_of_a_stopped_run_returns_without_asking_the_model(
    llm_model, cpu_hardware, sample_problems, answers
):
    answers({RELU: RELU_CORRECT})
    run = make_run(llm_model, cpu_hardware)
    run_services.run_start(run=run)
    run_services.run_stop(run=run)
    generation = run.generations.get()
    assert step(generation) == "run stopped"
    generation.refresh_from_db()
    assert (generation.status, generation.attempts) == (Generation.Status.PENDING, 0)


def test_resuming_queues_only_the_steps_not_finished(
    llm_model, cpu_hardware, sample_problems, answers, django_capture_on_commit_callbacks
):
    answers({"*": RELU_CORRECT})
    run = make_run(llm_model, cpu_hardware, problems=[RELU, ADD, GELU])
    run_services.run_start(run=run)
    first = run.generations.get(problem__slug=RELU)
    assert step(first) == Generation.Status.DONE
    run_services.run_stop(run=run)
    with pytest.raises(run_services.RunError):
        run_services.run_stop(run=run)
    queued_before = len(generation_tasks())
    with django_capture_on_commit_callbacks(execute=True):
        run_services.run_resume(run=run)
    assert run.status == Run.Status.RUNNING
    new = generation_tasks()[queued_before:]
    pending = run.generations.filter(status=Generation.Status.PENDING)
    assert sorted(new) == sorted((g.pk, 0) for g in pending) and len(new) == 2
    assert first.pk not in {args[0] for args in new}


# ---- refinement --------------------------------------------------------------------------------


def test_a_refinement_turn_waits_for_the_evaluation_and_carries_its_feedback(
    llm_model, cpu_hardware, sample_problems, answers, django_capture_on_commit_callbacks
):
    answers({f"{RELU}#turn0": RELU_WRONG, f"{RELU}#turn1": RELU_CORRECT})
    run = make_run(llm_model, cpu_hardware, refinement_turns=1)
    run_services.run_start(run=run)
    first = run.generations.get(turn=0)
    assert step(first) == Generation.Status.DONE
    first.refresh_from_db()
    # Its evaluation is not stored yet: no second turn, and the run is not finished.
    assert run_services.run_advance(run=run) == 0
    assert run.generations.count() == 1
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING

    finish_evaluation(first.submission, verdict="incorrect", error="max difference 0.42")
    with django_capture_on_commit_callbacks(execute=True):
        assert run_services.run_advance(run=run) == 1
    second = run.generations.get(turn=1)
    assert (second.pk, 0) in generation_tasks()
    assert step(second) == Generation.Status.DONE
    second.refresh_from_db()
    # The second prompt holds the first answer and what the evaluator said of it.
    assert RELU_WRONG in second.prompt
    assert "Verdict: incorrect" in second.prompt and "max difference 0.42" in second.prompt
    assert "2 ms" in second.prompt and "1 ms" in second.prompt
    assert second.submission.source != first.submission.source
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED


def test_after_an_answer_without_code_the_next_turn_follows_at_once(
    llm_model, cpu_hardware, sample_problems, answers
):
    answers({f"{RELU}#turn0": NO_CODE, f"{RELU}#turn1": RELU_CORRECT})
    run = make_run(llm_model, cpu_hardware, refinement_turns=1)
    run_services.run_start(run=run)
    assert step(run.generations.get(turn=0)) == Generation.Status.NO_CODE
    second = run.generations.get(turn=1)
    assert step(second) == Generation.Status.DONE
    second.refresh_from_db()
    assert "no Python code block" in second.prompt


# ---- reading a run -----------------------------------------------------------------------------


def test_progress_and_fast_p_count_every_problem_of_the_level(
    llm_model, cpu_hardware, sample_problems, answers
):
    answers({RELU: RELU_CORRECT, ADD: NO_CODE})
    run = make_run(llm_model, cpu_hardware, problems=[RELU, ADD])
    run_services.run_start(run=run)
    for generation in run.generations.all():
        step(generation)
    relu = run.generations.get(problem__slug=RELU).submission
    finish_evaluation(relu, verdict="correct", speedup=1.2)

    progress = run_selectors.run_progress(run)
    assert {k: progress[k] for k in ("generated", "no_code", "submissions", "evaluated",
                                     "correct")} == {
        "generated": 2, "no_code": 1, "submissions": 1, "evaluated": 1, "correct": 1
    }
    [row] = run_selectors.run_fast_p(run)
    assert (row.level, row.problems, row.correct) == (1, 2, 1)
    assert row.fast_p[0.0] == 0.5 and row.fast_p[1.0] == 0.5 and row.fast_p[1.5] == 0.0
