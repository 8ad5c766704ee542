"""GET /api/v1/problems/, /api/v1/problems/LEVEL/NUMBER/ and /api/v1/hardware/."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from evaluation.models import Hardware, Runner
from problems.models import Baseline, Problem
from problems.services import problem_upsert
from submissions.services import submission_create
from tests.api_support import SchemaCheckedClient, token_for
from tests.conftest import kernel_source

pytestmark = pytest.mark.django_db


@pytest.fixture
def api():
    return SchemaCheckedClient()


def slugs(response) -> list[str]:
    return [problem["slug"] for problem in response.json()["results"]]


def test_it_lists_open_problems_to_anyone(api, sample_problems):
    response = api.get("/api/v1/problems/")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == len(sample_problems)
    assert "level1/901_Small_ReLU" in slugs(response)
    first = body["results"][0]
    assert first["url"].endswith(f"/api/v1/problems/{first['slug']}/")  # by its slug


def test_it_filters_problems_by_level_status_and_text(api, sample_problems):
    level2 = api.get("/api/v1/problems/", {"level": 2})
    assert slugs(level2) == ["level2/901_Small_Linear_GELU"]
    text = api.get("/api/v1/problems/", {"q": "relu"})
    assert slugs(text) == ["level1/901_Small_ReLU"]
    sample_problems["level1/904_Small_Add"].retire()
    assert "level1/904_Small_Add" not in slugs(api.get("/api/v1/problems/"))
    retired = api.get("/api/v1/problems/", {"status": "retired"})
    assert slugs(retired) == ["level1/904_Small_Add"]


def test_it_rejects_an_unknown_status_filter(api, sample_problems):
    response = api.get("/api/v1/problems/", {"status": "shiny"})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert "status" in response.json()["errors"]


def test_it_pages_through_problems(api, sample_problems):
    page = api.get("/api/v1/problems/", {"limit": 2})
    assert len(page.json()["results"]) == 2
    assert page.json()["next"]
    rest = api.get("/api/v1/problems/", {"limit": 100, "offset": 2})
    assert len(rest.json()["results"]) == len(sample_problems) - 2


def test_a_problem_comes_with_its_reference_source_and_baselines(api, relu_problem, cpu_hardware):
    Baseline.objects.create(
        problem=relu_problem, hardware=cpu_hardware, mode=Baseline.Mode.EAGER, median_ms=0.5
    )
    response = api.get("/api/v1/problems/1/901/")
    assert response.status_code == 200
    problem = response.json()
    assert problem["slug"] == "level1/901_Small_ReLU"
    assert problem["source"] == relu_problem.current_version.source
    assert "def get_inputs" in problem["source"]
    assert problem["version"] == 1 and problem["open_for_submissions"] is True
    assert problem["baselines"] == [{"hardware": "cpu", "mode": "eager", "median_ms": 0.5}]


def test_an_unknown_problem_is_404(api, sample_problems):
    response = api.get("/api/v1/problems/1/999/")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_hardware_shows_backends_queue_length_and_online_runners(
    api, user, relu_problem, cpu_hardware
):
    Hardware.objects.create(slug="h200", name="NVIDIA H200", backends=["cuda", "triton"])
    for _ in range(2):
        submission_create(
            user=user, problem=relu_problem, source=kernel_source("relu_correct.py"),
            backend="torch", hardware=cpu_hardware,
        )
    Runner.objects.create(name="alive", hardware=cpu_hardware)
    Runner.objects.create(
        name="gone", hardware=cpu_hardware, last_seen=timezone.now() - timedelta(hours=1)
    )
    response = api.get("/api/v1/hardware/")
    assert response.status_code == 200
    rows = {row["slug"]: row for row in response.json()}
    assert rows["cpu"]["queue_length"] == 2
    assert rows["cpu"]["online_runners"] == 1
    assert "torch" in rows["cpu"]["backends"]
    assert (rows["h200"]["queue_length"], rows["h200"]["online_runners"]) == (0, 0)
    assert rows["h200"]["backends"] == ["cuda", "triton"]


def test_a_bad_token_is_refused_even_where_reading_is_public(api, sample_problems):
    response = api.with_token("kb_not-a-real-token").get("/api/v1/problems/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Token")
    assert response.json()["code"] == "authentication_failed"


def test_a_token_without_the_read_scope_cannot_read(api, user, sample_problems):
    key = token_for(user, scopes=("submit",))
    response = api.with_token(key).get("/api/v1/problems/")
    assert response.status_code == 403
    assert "read" in response.json()["detail"]


def test_a_draft_problem_is_listed_with_its_status_to_staff_only(api, db):
    problem_upsert(level=3, number=7, name="Draft", source="class Model: pass\n")
    assert slugs(api.get("/api/v1/problems/", {"status": "draft"})) == []
    admin = get_user_model().objects.create_user("cur", password="a-long-passphrase-9",
                                                 is_staff=True)
    response = api.with_token(token_for(admin)).get("/api/v1/problems/", {"status": "draft"})
    assert slugs(response) == ["level3/7_Draft"]
    assert Problem.objects.get(slug="level3/7_Draft").status == "draft"
