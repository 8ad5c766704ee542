"""The shape of a failed trial's error (evaluator/judge/error_shape.py, issue 64) reaches its
author first: on the submission page above the hint and the worst elements, in the API
(`evaluation.diagnosis.pattern`, with the worst positions) and in `kb status`; on a private
problem nobody else sees it, like the rest of the diagnosis (selectors.can_see_source)."""

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from evaluator.judge.diagnose import trial_diagnosis
from kbcli import main as kb
from submissions.models import Evaluation, Submission
from submissions.runs.llm import diagnosis_lines
from submissions.services import submission_create
from tests.api_support import openapi_schema, token_for
from tests.conftest import kernel_source
from tests.harness.wrong_kernels import record

pytestmark = pytest.mark.django_db


def tail_trial() -> dict:
    """The record the judge stores for the ReLU that never writes its last column (stored
    outputs of the real wrong kernel, diagnosed as in a failed trial)."""
    outputs, case = record.stored("tail_column_relu"), record.case("tail_column_relu")
    expected, got = outputs["expected"], outputs["got"]
    diagnosis = trial_diagnosis(case["model"], case["inputs"], expected, got,
                                atol=record.TOLERANCE, rtol=record.TOLERANCE)
    diff = (got - expected).abs()
    return {"k": 1, "passed": False, "max_abs_diff": float(diff.max()),
            "mean_abs_diff": float(diff.mean()), "reason": "values differ", "flags": [],
            "diagnosis": diagnosis}


@pytest.fixture
def failed(user, relu_problem, cpu_hardware) -> Submission:
    cache.clear()
    submission = submission_create(user=user, problem=relu_problem,
                                   source=kernel_source("relu_wrong.py"), backend="torch",
                                   hardware=cpu_hardware)
    Evaluation.objects.create(
        submission=submission, hardware=submission.hardware,
        problem_version=submission.problem_version, source_hash=submission.source_hash,
        verdict="incorrect", error="trial 1: values differ", trials=[tail_trial()],
        finished_at=timezone.now())
    submission.mark_finished(verdict="incorrect")
    return submission


def api_submission(user, pk: int) -> dict:
    return Client(HTTP_AUTHORIZATION=f"Token {token_for(user)}").get(
        f"/api/v1/submissions/{pk}/").json()


def test_the_api_gives_the_owner_the_pattern_and_the_worst_positions(user, failed):
    diagnosis = api_submission(user, failed.pk)["evaluation"]["diagnosis"]
    pattern = diagnosis["pattern"]
    assert pattern["kind"] == "tail" and pattern["ranges"] == [
        {"dim": 1, "ranges": [[511, 511]]}]
    assert pattern["sentence"].startswith(
        f"All {pattern['count']} wrong values are in the last column, 511")
    assert [w["position"][1] for w in diagnosis["worst"]] == [511] * 5
    assert "hint" not in diagnosis and "precision" not in diagnosis


def test_kb_status_shows_the_pattern_first_then_the_worst_positions(user, failed):
    data = api_submission(user, failed.pk)
    text = kb.summary(data)
    pattern = data["evaluation"]["diagnosis"]["pattern"]
    assert f"  diagnosis  {pattern['sentence']}\n" in text
    worst = data["evaluation"]["diagnosis"]["worst"][0]
    position = ", ".join(map(str, worst["position"]))
    assert f"at ({position}): expected {worst['expected']}, got {worst['got']}" in text
    assert text.index(pattern["sentence"]) < text.index("elements outside the tolerance")
    assert "precision" not in text


def test_the_page_puts_the_pattern_above_the_worst_elements_with_no_precision_box(
        client, user, failed):
    client.force_login(user)
    page = client.get(f"/submissions/{failed.pk}/").content.decode()
    assert 'data-pattern="tail"' in page
    assert page.index('id="diagnosis-pattern"') < page.index('id="diagnosis-worst"')
    assert "in the last column, 511" in page
    assert "Maybe a precision issue" not in page and 'id="diagnosis-hint"' not in page


def test_a_private_problems_pattern_reaches_no_one_who_may_not_see_the_source(
        client, user, failed):
    failed.problem.code_visibility = "owner"
    failed.problem.save(update_fields=["code_visibility"])
    # Its owner still reads it: it is about their own kernel's output, like the trial's note.
    assert "last column" in kb.summary(api_submission(user, failed.pk))
    stranger = get_user_model().objects.create_user(username="eve",
                                                    password="a-long-passphrase-2")
    data = api_submission(stranger, failed.pk)
    assert data["evaluation"]["diagnosis"] is None
    assert "diagnosis" not in data["evaluation"]["trials"][0]
    assert "diagnosis" not in kb.summary(data) and "last column" not in kb.summary(data)
    client.force_login(stranger)
    page = client.get(f"/submissions/{failed.pk}/").content.decode()
    assert 'id="diagnosis-pattern"' not in page and "last column" not in page


def test_the_schema_documents_the_pattern():
    fields = openapi_schema()["components"]["schemas"]["Evaluation"]["properties"]
    description = fields["diagnosis"]["description"]
    assert "`pattern` first" in description and "fits_precision" in description


def test_a_model_runs_feedback_begins_with_the_pattern():
    diagnosis = tail_trial()["diagnosis"]
    lines = diagnosis_lines(diagnosis)
    assert lines[0] == f"Error pattern: {diagnosis['pattern']['sentence']}"
    assert not any(line.startswith("Diagnosis:") for line in lines)  # no precision guess
