"""The leaderboard REST API (/api/v1/leaderboard/...) and its OpenAPI description."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import include, path
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from evaluation.services import hardware_register
from submissions.runs.models import Model, Run
from tests.leaderboard_factory import make_problem, make_result

# This app's API under the prefix the site mounts it on, with the pages its rows link to; the
# tests do not depend on the rest of the site's API being importable.
urlpatterns = [
    path("api/v1/leaderboard/", include("leaderboard.api_urls")),
    path("leaderboard/", include("leaderboard.urls")),
    path("problems/", include("problems.urls")),
    path("submissions/", include("submissions.urls")),
]
pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]

API = "/api/v1/leaderboard"


@pytest.fixture
def gpu(db):
    return hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")


@pytest.fixture
def data(gpu):
    make = get_user_model().objects.create_user
    ada = make(username="ada", password="a-long-passphrase-1")
    llm = Model.objects.create(litellm_name="openai/gpt-test", display_name="GPT Test")
    p1, p2 = make_problem(1, 1), make_problem(1, 2)
    run = Run.objects.create(name="sweep", model=llm, hardware=gpu, samples_per_problem=2)
    run.problems.set([p1, p2])
    make_result(problem=p1, hardware=gpu, user=ada, ms=1.0)
    make_result(problem=p1, hardware=gpu, model=llm, run=run, ms=4.0, reference_ms=8.0)
    make_result(problem=p1, hardware=gpu, model=llm, run=run, sample_index=1, ms=2.0)
    make_result(problem=p2, hardware=gpu, model=llm, run=run, verdict="incorrect")
    make_result(problem=p2, hardware=gpu, user=ada, ms=0.1, flags=("input_mutation",))
    return {"ada": ada, "llm": llm, "run": run, "p1": p1, "p2": p2}


def test_a_board_lists_ranked_rows_flagged_kernels_and_records(data):
    response = APIClient().get(f"{API}/boards/1/1/h200/")
    assert response.status_code == 200
    body = response.json()
    assert body["problem"]["slug"] == "level1/1_P1" and body["hardware"] == "h200"
    assert [(r["rank"], r["participant"], r["candidate_ms"]) for r in body["rows"]] == [
        (1, "ada", 1.0),
        (2, "GPT Test", 2.0),
    ]
    assert body["rows"][0]["participant_key"] == f"user:{data['ada'].pk}"
    assert [r["candidate_ms"] for r in body["records"]] == [1.0]
    flagged = APIClient().get(f"{API}/boards/1/2/h200/").json()["flagged"]
    assert flagged[0]["flags"] == ["input_mutation"]


def test_an_unknown_board_is_a_404(data):
    assert APIClient().get(f"{API}/boards/1/1/tpu/").status_code == 404


def test_the_models_table_takes_filters_and_rejects_bad_ones(data):
    client = APIClient()
    [row] = client.get(f"{API}/models/", {"hardware": "h200", "level": 1}).json()["rows"]
    assert (row["model"], row["problems"], row["correct"]) == ("GPT Test", 2, 1)
    # The model's best on p1 is its fastest kernel (2 ms against a 2 ms reference: 1.0x), p2 is
    # incorrect: over 2 problems, fast_0.5 = 1/2 and fast_1 = 0 (1.0 is not faster than 1).
    assert (row["fast_p"]["0.5"], row["fast_p"]["1"]) == (0.5, 0.0)
    assert client.get(f"{API}/models/", {"level": 2}).json()["rows"] == []

    response = client.get(f"{API}/models/", {"hardware": "tpu", "baseline": "fastest"})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid"
    assert "does not exist" in str(body["errors"]["hardware"])
    assert "fastest" in str(body["errors"]["baseline"])


def test_a_models_page_has_its_summary_runs_and_entries(data):
    body = APIClient().get(f"{API}/models/{data['llm'].pk}/").json()
    assert body["litellm_name"] == "openai/gpt-test"
    assert [r["run"] for r in body["runs"]] == ["sweep"]
    assert body["runs"][0]["pass_at_k"] == {"pass@1": 0.5, "pass@2": 0.5}
    assert [e["problem"] for e in body["entries"]] == ["level1/1_P1", "level1/2_P2"]
    assert APIClient().get(f"{API}/models/999/").status_code == 404


def test_a_run_gives_its_summary_and_kernelbench_eval_results(data):
    run = data["run"]
    body = APIClient().get(f"{API}/runs/{run.pk}/", {"baseline": "compile"}).json()
    assert body["summary"][0]["baseline"] == "compile"
    results = APIClient().get(f"{API}/runs/{run.pk}/eval_results.json").json()
    assert [e["sample_id"] for e in results["1"]] == [0, 1]
    assert results["2"][0]["correctness"] is False
    response = APIClient().get(f"{API}/runs/{run.pk}/eval_results.json", {"level": 3})
    assert response.status_code == 400
    assert response.json() == {"detail": "this run has no problems in level 3", "code": "bad_level"}


def test_a_users_standing_and_the_recent_records(data):
    entries = APIClient().get(f"{API}/users/ada/").json()["entries"]
    assert [(e["problem"], e["rank"], e["flags"]) for e in entries] == [
        ("level1/1_P1", 1, []),
        ("level1/2_P2", None, ["input_mutation"]),
    ]
    rows = APIClient().get(f"{API}/records/", {"limit": 1}).json()["rows"]
    assert len(rows) == 1
    assert APIClient().get(f"{API}/records/", {"limit": 0}).status_code == 400


def test_the_openapi_schema_describes_the_leaderboard_endpoints():
    schema = SchemaGenerator(patterns=urlpatterns[:1]).get_schema(request=None, public=True)
    paths = schema["paths"]
    assert "/api/v1/leaderboard/models/" in paths
    board = paths["/api/v1/leaderboard/boards/level{level}/{name}/{hardware}/"]["get"]
    assert board["operationId"] == "leaderboard_board"
    by_number = paths["/api/v1/leaderboard/boards/{level}/{number}/{hardware}/"]["get"]
    assert by_number["operationId"] == "leaderboard_board_by_number"
    parameters = {p["name"] for p in paths["/api/v1/leaderboard/models/"]["get"]["parameters"]}
    assert parameters == {"hardware", "level", "baseline"}
