"""A failed trial's diagnosis (evaluator/judge/diagnose.py) reaches its author: on the
submission page near the error, in the API (`evaluation.diagnosis`, documented in the schema),
and in the next turn's prompt of a model run; others see none of it, like the error text."""

import pytest
import torch
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from evaluator.judge.diagnose import TF32_HINT, round_to_tf32, trial_diagnosis
from submissions.models import Evaluation, Submission
from submissions.runs import services as run_services
from submissions.runs.llm import MOCK_FILE_ENV
from submissions.runs.models import Generation
from submissions.services import submission_create
from tests.api_support import openapi_schema, token_for
from tests.conftest import kernel_source
from tests.runs_support import RELU_CORRECT, RELU_WRONG, write_answers

pytestmark = pytest.mark.django_db
pytest_plugins = ["tests.runs_support"]


class _MatMul(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


def tf32_trial() -> dict:
    """The record the judge stores for a matmul kernel run in TF32 (a real diagnosis)."""
    torch.manual_seed(0)
    a, b = torch.randn(64, 1024), torch.randn(1024, 64)
    expected = a @ b
    got = round_to_tf32(a) @ round_to_tf32(b)
    diagnosis = trial_diagnosis(_MatMul(), [a, b], expected, got, atol=1e-4, rtol=1e-4)
    return {"k": 1, "passed": False, "max_abs_diff": float((got - expected).abs().max()),
            "mean_abs_diff": 1e-3, "reason": "values differ", "flags": [],
            "diagnosis": diagnosis}


def finish_with(submission: Submission, trial: dict) -> Evaluation:
    evaluation = Evaluation.objects.create(
        submission=submission, hardware=submission.hardware,
        problem_version=submission.problem_version, source_hash=submission.source_hash,
        verdict="incorrect", error="trial 1: values differ", trials=[trial],
        finished_at=timezone.now(),
    )
    submission.mark_finished(verdict="incorrect")
    return evaluation


@pytest.fixture
def failed(user, relu_problem, cpu_hardware):
    cache.clear()
    submission = submission_create(user=user, problem=relu_problem,
                                   source=kernel_source("relu_correct.py"), backend="torch",
                                   hardware=cpu_hardware)
    finish_with(submission, tf32_trial())
    return submission


@pytest.fixture
def stranger(db):
    return get_user_model().objects.create_user(username="eve", password="a-long-passphrase-2")


def test_the_page_shows_the_owner_the_tf32_hint_next_to_the_error_and_the_worst_elements(
    client, user, failed
):
    client.force_login(user)
    page = client.get(f"/submissions/{failed.pk}/").content.decode()
    assert 'id="diagnosis-hint"' in page
    assert "consistent with TF32 accumulation: pass input_precision=&quot;ieee&quot; to tl.dot" \
        in page
    # Near the error: after it, before the trials table.
    assert page.index('id="evaluation-error"') < page.index('id="diagnosis"') \
        < page.index('id="trials"')
    assert 'id="diagnosis-worst"' in page and "Flat index" in page
    assert 'data-precision-match="tf32"' in page


def test_others_see_no_diagnosis_of_a_private_problem_on_the_page_or_in_the_api(
    client, stranger, failed
):
    # The diagnosis follows the source (selectors.can_see_source).
    failed.problem.code_visibility = "owner"
    failed.problem.save(update_fields=["code_visibility"])
    client.force_login(stranger)
    page = client.get(f"/submissions/{failed.pk}/").content.decode()
    assert 'id="diagnosis"' not in page and "TF32" not in page
    api = Client(HTTP_AUTHORIZATION=f"Token {token_for(stranger)}")
    evaluation = api.get(f"/api/v1/submissions/{failed.pk}/").json()["evaluation"]
    assert evaluation["diagnosis"] is None
    assert evaluation["trials"] and "diagnosis" not in evaluation["trials"][0]


def test_the_api_gives_the_owner_the_diagnosis_with_its_hint(user, failed):
    api = Client(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    evaluation = api.get(f"/api/v1/submissions/{failed.pk}/").json()["evaluation"]
    diagnosis = evaluation["diagnosis"]
    assert diagnosis["k"] == 1 and diagnosis["precision_match"] == "tf32"
    assert TF32_HINT in diagnosis["hint"]
    worst = diagnosis["worst"][0]
    assert set(worst) == {"index", "position", "expected", "got", "abs_diff"}
    assert evaluation["trials"][0]["diagnosis"]["hint"] == diagnosis["hint"]


def test_the_schema_documents_the_diagnosis_and_its_tf32_hint():
    fields = openapi_schema()["components"]["schemas"]["Evaluation"]["properties"]
    assert "TF32" in fields["diagnosis"]["description"]
    assert "worst" in fields["diagnosis"]["description"]
    assert "diagnosis" in fields["trials"]["description"]


def test_a_model_runs_next_turn_is_told_the_hint_and_the_worst_elements(
    llm_model, cpu_hardware, sample_problems, tmp_path, monkeypatch, settings,
    django_capture_on_commit_callbacks
):
    settings.LLM_RETRY_BASE_SECONDS = 0.001
    relu = "level1/901_Small_ReLU"
    answers = {f"{relu}#turn0": RELU_WRONG, f"{relu}#turn1": RELU_CORRECT}
    monkeypatch.setenv(MOCK_FILE_ENV, str(write_answers(tmp_path / "answers.json", answers)))
    run = run_services.run_create(model=llm_model, problems=[relu], backend="torch",
                                  hardware=cpu_hardware, refinement_turns=1)
    run_services.run_start(run=run)
    first = run.generations.get(turn=0)
    run_services.generation_step(generation_id=first.pk, attempts=0)
    first.refresh_from_db()
    trial = tf32_trial()
    finish_with(first.submission, trial)
    with django_capture_on_commit_callbacks(execute=True):
        assert run_services.run_advance(run=run) == 1
    second = run.generations.get(turn=1)
    run_services.generation_step(generation_id=second.pk, attempts=0)
    second.refresh_from_db()
    assert second.status == Generation.Status.DONE
    assert f"Diagnosis: The error is {TF32_HINT}" in second.prompt
    worst = trial["diagnosis"]["worst"][0]
    position = ", ".join(map(str, worst["position"]))
    assert f"at ({position}): expected {worst['expected']}, got {worst['got']}" in second.prompt
