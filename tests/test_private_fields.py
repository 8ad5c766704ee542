"""Private means private in every field (issue 61): what a real evaluation on a private problem
stores (a failed trial's error and note, its diagnosis, the static report with the reference's
values) reaches a page or an API field only by the code visibility rule (submissions.selectors:
can_see_source for what is derived from the kernel's source, the problem's reference rule for
what is derived from its reference), for the anonymous visitor, another user, the owner and
staff.

Each kernel is evaluated for real (the runner's own task, the sandboxed judge and worker on the
CPU), once per test session: later tests store the same result again, through the same task.
"""

import copy
import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils.module_loading import import_string

from evaluator.runner import sandbox
from problems.models import Problem
from problems.services import problem_upsert
from submissions.models import Evaluation, Submission
from submissions.services import submission_create
from tests.api_support import token_for
from tests.conftest import take_queued_tasks

pytestmark = pytest.mark.django_db(transaction=True)

# A name and a size that only the private reference holds.
HIDDEN_NAME = "kb_hidden_scale_QZ7"
REFERENCE = f'''
import torch
import torch.nn as nn

{HIDDEN_NAME} = 3.0
batch_size = 4093
dim = 8


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * {HIDDEN_NAME}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''
# Copies the reference's constant by name, which its own module does not define: the failed
# trial's error is "NameError: name 'kb_hidden_scale_QZ7' is not defined".
QUOTES_A_NAME = f'''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x) * {HIDDEN_NAME}
'''
# Redefines the reference's batch size (the static report compares it with the reference's) and
# returns a wrong shape (the failed trial's note quotes the expected one, the reference's).
CHANGES_A_SIZE = '''
import torch
import torch.nn as nn

batch_size = 1


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x[:batch_size]) * 3.0
'''
# What the reference's size looks like wherever it is quoted.
REFERENCE_SIZE = ("(4093, 8)", "reference: 4093", '"reference": 4093', "[4093, 8]")

_RESULTS: dict[str, dict] = {}


@pytest.fixture
def people(db):
    make = get_user_model().objects.create_user
    return {"anonymous": None, "stranger": make(username="eve"),
            "owner": make(username="alice"), "staff": make(username="root", is_staff=True)}


@pytest.fixture
def private_problem(db):
    problem = problem_upsert(level=1, number=961, name="Private_Scaled_ReLU",
                             source=REFERENCE).problem
    Problem.objects.filter(pk=problem.pk).update(status=Problem.Status.PUBLISHED,
                                                 code_visibility=Problem.CodeVisibility.OWNER)
    problem.refresh_from_db()
    return problem


@pytest.fixture
def evaluated(people, private_problem, cpu_hardware, settings, monkeypatch):
    """Submit a kernel as the owner (a test run) and evaluate it as a runner's worker does."""
    settings.REVERIFY_NEW_RECORDS = False
    monkeypatch.setenv("KBSITE_RUNNER_NAME", "worker:1")
    real = sandbox.run_job

    def run_once(job, **kwargs):
        key = job["candidate_source"]
        if key not in _RESULTS:
            _RESULTS[key] = real(job, **kwargs)
        return copy.deepcopy(_RESULTS[key])

    monkeypatch.setattr(sandbox, "run_job", run_once)

    def evaluate(source: str) -> Submission:
        submission = submission_create(
            user=people["owner"], problem=private_problem, source=source, backend="torch",
            hardware=cpu_hardware, filename="kernel.py", test_run=True, timed=False)
        for task in take_queued_tasks("cpu"):
            import_string(task["func"])(*task["args"], **task["kwargs"])
        submission.refresh_from_db()
        assert submission.status == Submission.Status.FINISHED
        return submission

    return evaluate


def api_get(user, pk: int):
    headers = {"HTTP_AUTHORIZATION": f"Token {token_for(user)}"} if user else {}
    return Client(**headers).get(f"/api/v1/submissions/{pk}/")


def pages(user, pk: int) -> dict[str, str]:
    client = Client()
    if user is not None:
        client.force_login(user)
    return {url: client.get(url).content.decode()
            for url in (f"/submissions/{pk}/", f"/submissions/{pk}/evaluation/",
                        f"/submissions/{pk}/status.json")}


def test_the_evaluations_fail_as_their_kernels_do(evaluated):
    quoting = evaluated(QUOTES_A_NAME)
    assert quoting.verdict == "runtime_error"
    trial = quoting.latest_evaluation.trials[0]
    assert HIDDEN_NAME in trial["error"] and not trial["passed"]
    resizing = evaluated(CHANGES_A_SIZE)
    assert resizing.verdict == "incorrect"
    evaluation = resizing.latest_evaluation
    assert "(4093, 8)" in evaluation.trials[0]["reason"]
    assert "problem_size_changed" in evaluation.flags
    assert evaluation.static_report["problem_constants_changed"] == {
        "batch_size": {"reference": 4093, "candidate": 1}}


def test_a_failed_trials_error_reaches_no_api_field_for_another_user(people, evaluated):
    submission = evaluated(QUOTES_A_NAME)
    response = api_get(people["stranger"], submission.pk)
    assert response.status_code == 200
    raw = response.content.decode()
    assert HIDDEN_NAME not in raw
    trials = json.loads(raw)["evaluation"]["trials"]
    assert trials and all(set(t) <= {"k", "passed", "max_abs_diff", "mean_abs_diff", "flags",
                                     "unwritten_elements", "nonfinite"} for t in trials)


@pytest.mark.parametrize("who", ["owner", "staff"])
def test_the_owner_and_staff_see_the_failed_trials_error(who, people, evaluated):
    submission = evaluated(QUOTES_A_NAME)
    body = api_get(people[who], submission.pk).json()
    error = body["evaluation"]["trials"][0]["error"]
    assert f"name '{HIDDEN_NAME}' is not defined" in error
    assert HIDDEN_NAME in body["evaluation"]["error"]
    for page in pages(people[who], submission.pk).values():
        assert HIDDEN_NAME in page


@pytest.mark.parametrize("who", ["anonymous", "stranger"])
def test_pages_and_the_api_quote_neither_source_nor_reference_to_who_may_not_see_them(
        who, people, evaluated):
    for source in (QUOTES_A_NAME, CHANGES_A_SIZE):
        submission = evaluated(source)
        shown = dict(pages(people[who], submission.pk))
        response = api_get(people[who], submission.pk)
        # The API asks for a token: the anonymous visitor gets nothing there at all.
        assert response.status_code == (401 if who == "anonymous" else 200)
        shown["api"] = response.content.decode()
        for where, body in shown.items():
            assert HIDDEN_NAME not in body, where
            for quoted in REFERENCE_SIZE:
                assert quoted not in body, (where, quoted)


def test_the_owner_gets_the_static_report_without_the_private_references_values(
        people, evaluated):
    submission = evaluated(CHANGES_A_SIZE)
    body = api_get(people["owner"], submission.pk).json()
    evaluation = body["evaluation"]
    report = evaluation["static_report"]
    # Its own size and the finding stay: the kernel's author learns what the judge saw.
    assert report["problem_constants_changed"] == {"batch_size": {"candidate": 1}}
    assert any("batch_size = 1" in f["detail"] for f in report["findings"])
    assert "problem_size_changed" in evaluation["flags"]
    raw = json.dumps(body)
    assert "reference: 4093" not in raw and '"reference": 4093' not in raw
    # The failed trial's note is about the output, which the owner's kernel was handed the
    # inputs of: the owner may read it.
    assert "(4093, 8)" in evaluation["trials"][0]["reason"]


def test_staff_get_the_static_report_with_the_references_values(people, evaluated):
    submission = evaluated(CHANGES_A_SIZE)
    report = api_get(people["staff"], submission.pk).json()["evaluation"]["static_report"]
    assert report["problem_constants_changed"] == {
        "batch_size": {"reference": 4093, "candidate": 1}}
    details = report["checks"]["flag_details"]["problem_size_changed"]["constants"]
    assert details == {"batch_size": {"reference": 4093, "candidate": 1}}


def test_a_report_stored_before_quotes_no_reference_value_to_the_owner(people,
                                                                       private_problem,
                                                                       cpu_hardware):
    # What the judge stored before the reference's value left the finding's text.
    submission = Submission.objects.create(
        user=people["owner"], problem=private_problem,
        problem_version=private_problem.current_version, hardware=cpu_hardware,
        backend="torch", source=CHANGES_A_SIZE, status=Submission.Status.FINISHED,
        verdict="incorrect")
    changed = {"batch_size": {"reference": 4093, "candidate": 1}}
    Evaluation.objects.create(
        submission=submission, hardware=cpu_hardware,
        problem_version=submission.problem_version, verdict="incorrect",
        static_report={"findings": [{"pattern": "problem size", "line": 1, "count": 1,
                                     "detail": "batch_size = 1 (reference: 4093)",
                                     "severity": "high", "category": "problem sizes"}],
                       "problem_constants_changed": changed,
                       "checks": {"flag_details": {"problem_size_changed": {
                           "constants": changed}}}})
    owner = json.dumps(api_get(people["owner"], submission.pk).json())
    assert "4093" not in owner and "batch_size = 1" in owner
    staff = json.dumps(api_get(people["staff"], submission.pk).json())
    assert "batch_size = 1 (reference: 4093)" in staff
