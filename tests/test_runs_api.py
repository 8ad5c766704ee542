"""The run API (/api/v1/runs/...): staff create, start, stop and resume runs; anyone reads."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import include, path
from rest_framework.test import APIClient

from accounts.models import ApiToken
from kbsite.urls import urlpatterns as site_urlpatterns
from submissions.runs import services as run_services
from submissions.runs import urls as run_urls
from submissions.runs.models import Run
from tests.runs_support import MODEL_NAME, queued_tasks

# Fixtures shared by the run tests: llm_model, start_generation_cluster.
pytest_plugins = ["tests.runs_support"]

# The run routes, whether or not the site's URLconf includes them yet.
urlpatterns = [
    *site_urlpatterns,
    path("runs/", include("submissions.runs.urls")),
    path("api/", include(run_urls.api_urlpatterns)),
]
pytestmark = [pytest.mark.urls(__name__), pytest.mark.django_db]

RELU = "level1/901_Small_ReLU"
ADD = "level1/904_Small_Add"


def client_with_token(user, scopes=None) -> APIClient:
    _, key = ApiToken.issue(user=user, scopes=scopes)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def staff(db):
    return get_user_model().objects.create_user(
        username="grace", password="a-long-passphrase-2", is_staff=True
    )


@pytest.fixture
def staff_client(staff) -> APIClient:
    return client_with_token(staff)


def create_body(**overrides) -> dict:
    body = {"model": MODEL_NAME, "problems": [RELU, ADD], "backend": "torch", "hardware": "cpu"}
    body.update(overrides)
    return body


def test_staff_create_a_run_and_it_starts_generating(
    staff, staff_client, llm_model, cpu_hardware, sample_problems,
    django_capture_on_commit_callbacks,
):
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            "/api/v1/runs/", create_body(samples_per_problem=2, name="smoke"), format="json"
        )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["name"], body["model"], body["status"], body["hardware"]) == (
        "smoke", MODEL_NAME, "running", "cpu"
    )
    assert sorted(body["problems"]) == sorted([RELU, ADD])
    assert body["progress"]["planned_steps"] == 4 and body["progress"]["pending"] == 4
    run = Run.objects.get(pk=body["id"])
    assert run.created_by == staff
    assert len(queued_tasks(run_services.GENERATION_QUEUE)) == 4


def test_a_run_created_with_start_false_waits_for_its_start(
    staff_client, llm_model, cpu_hardware, sample_problems, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        body = staff_client.post("/api/v1/runs/", create_body(start=False), format="json").json()
    assert body["status"] == "pending" and queued_tasks(run_services.GENERATION_QUEUE) == []
    with django_capture_on_commit_callbacks(execute=True):
        started = staff_client.post(f"/api/v1/runs/{body['id']}/start/")
    assert started.status_code == 200 and started.json()["status"] == "running"
    assert len(queued_tasks(run_services.GENERATION_QUEUE)) == 2


def test_stop_and_resume_answer_409_when_the_run_is_not_in_a_state_for_it(
    staff_client, llm_model, cpu_hardware, sample_problems
):
    run_id = staff_client.post("/api/v1/runs/", create_body(), format="json").json()["id"]
    stopped = staff_client.post(f"/api/v1/runs/{run_id}/stop/")
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped"
    again = staff_client.post(f"/api/v1/runs/{run_id}/stop/")
    assert again.status_code == 409 and again.json()["code"] == "bad_state"
    resumed = staff_client.post(f"/api/v1/runs/{run_id}/resume/")
    assert resumed.status_code == 200 and resumed.json()["status"] == "running"
    assert staff_client.post("/api/v1/runs/999999/stop/").status_code == 404


@pytest.mark.parametrize(
    ("overrides", "code", "allowed"),
    [
        ({"model": "nobody/nothing"}, "unknown_model", [MODEL_NAME]),
        ({"hardware": "h100"}, "unknown_hardware", ["cpu"]),
        ({"backend": "fortran"}, "unknown_backend", None),
        ({"problems": ["level9/1_Nothing"]}, "unknown_problem", None),
        ({"samples_per_problem": 0}, "bad_samples", None),
        ({"problems": "not a list"}, "invalid", None),
        ({"backend": None}, "invalid", None),
    ],
)
def test_bad_input_is_refused_with_a_code_and_creates_nothing(
    staff_client, llm_model, cpu_hardware, sample_problems, overrides, code, allowed
):
    response = staff_client.post("/api/v1/runs/", create_body(**overrides), format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == code and body["detail"]
    if allowed is not None:
        assert body["allowed"] == allowed
    assert not Run.objects.exists()


def test_only_staff_with_the_submit_scope_may_create_or_steer_runs(
    user, staff, llm_model, cpu_hardware, sample_problems
):
    run = run_services.run_create(model=llm_model, problems=[RELU], backend="torch",
                                  hardware=cpu_hardware)
    assert APIClient().post("/api/v1/runs/", create_body(), format="json").status_code == 401
    not_staff = client_with_token(user)
    assert not_staff.post("/api/v1/runs/", create_body(), format="json").status_code == 403
    assert not_staff.post(f"/api/v1/runs/{run.pk}/start/").status_code == 403
    read_only = client_with_token(staff, scopes=[ApiToken.Scope.READ])
    assert read_only.post(f"/api/v1/runs/{run.pk}/start/").status_code == 403
    run.refresh_from_db()
    assert run.status == Run.Status.PENDING and Run.objects.count() == 1


def test_anyone_reads_runs_with_their_progress_and_fast_p(
    staff_client, llm_model, cpu_hardware, sample_problems
):
    run_id = staff_client.post("/api/v1/runs/", create_body(), format="json").json()["id"]
    listed = APIClient().get("/api/v1/runs/", {"model": MODEL_NAME})
    assert listed.status_code == 200 and [r["id"] for r in listed.json()] == [run_id]
    assert APIClient().get("/api/v1/runs/", {"status": "finished"}).json() == []
    detail = APIClient().get(f"/api/v1/runs/{run_id}/").json()
    assert detail["progress"]["generated"] == 0
    [level1] = detail["fast_p"]
    assert (level1["level"], level1["problems"], level1["correct"]) == (1, 2, 0)
    assert level1["fast_p"]["0"] == 0.0 and "1" in level1["fast_p"]


def test_the_openapi_schema_describes_the_run_endpoints():
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    assert {"/api/v1/runs/", "/api/v1/runs/{id}/", "/api/v1/runs/{id}/resume/"} <= set(
        schema["paths"]
    )
    create = schema["paths"]["/api/v1/runs/"]["post"]
    assert create["operationId"] == "runs_create"
