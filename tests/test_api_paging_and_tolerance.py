"""Small API answers agents rely on: `page_size`/`page` paging (with a maximum) beside
limit/offset, and a problem's effective tolerances instead of null."""

import pytest

from evaluator.config import DEFAULT_TOLERANCE
from problems.models import Problem
from submissions.services import submission_create
from tests.api_support import SchemaCheckedClient, openapi_schema, token_for
from tests.conftest import kernel_source

pytestmark = pytest.mark.django_db


@pytest.fixture
def api():
    return SchemaCheckedClient()


def slugs(response) -> list[str]:
    return [problem["slug"] for problem in response.json()["results"]]


# ---- paging -------------------------------------------------------------------------------------


def test_page_size_sets_how_many_problems_come_back(api, sample_problems):
    assert len(sample_problems) > 2
    response = api.get("/api/v1/problems/", {"page_size": 2})
    assert response.status_code == 200
    assert len(response.json()["results"]) == 2
    assert response.json()["count"] == len(sample_problems)


def test_page_walks_the_pages_of_page_size(api, sample_problems):
    every = slugs(api.get("/api/v1/problems/"))
    pages = [slugs(api.get("/api/v1/problems/", {"page_size": 2, "page": n})) for n in (1, 2)]
    assert pages[0] + pages[1] == every[:4]


def test_the_next_link_of_a_page_size_request_works(api, sample_problems):
    first = api.get("/api/v1/problems/", {"page_size": 2}).json()
    assert "page_size" not in first["next"] and "limit=2" in first["next"]
    second = api.get(first["next"])
    assert second.status_code == 200
    assert slugs(second) == slugs(api.get("/api/v1/problems/"))[2:4]


def test_page_size_has_a_maximum_of_1000(api, sample_problems):
    response = api.get("/api/v1/problems/", {"page_size": 10**6})
    assert response.status_code == 200
    assert len(response.json()["results"]) == len(sample_problems)
    # Page 2 of "a million per page" starts at 1000: the page size taken was 1000.
    second = api.get("/api/v1/problems/", {"page_size": 10**6, "page": 2}).json()
    assert second["results"] == []
    assert "limit=1000" in second["previous"] and "offset" not in second["previous"]


def test_a_bad_page_size_or_both_spellings_are_refused(api, sample_problems):
    for query in ({"page_size": 0}, {"page_size": "many"}, {"page": 0},
                  {"limit": 2, "page_size": 3}, {"offset": 2, "page": 2}):
        response = api.get("/api/v1/problems/", query)
        assert response.status_code == 400, query
        assert response.json()["code"] == "invalid"


def test_page_size_pages_your_submissions_too(user, cpu_hardware, relu_problem):
    for _ in range(3):
        submission_create(user=user, problem=relu_problem, backend="torch",
                          hardware=cpu_hardware, source=kernel_source("relu_correct.py"))
    api = SchemaCheckedClient().with_token(token_for(user))
    response = api.get("/api/v1/submissions/", {"page_size": 2})
    assert response.status_code == 200
    assert len(response.json()["results"]) == 2 and response.json()["count"] == 3


def test_the_schema_lists_page_size_and_page():
    parameters = openapi_schema()["paths"]["/api/v1/problems/"]["get"]["parameters"]
    names = {parameter["name"] for parameter in parameters}
    assert {"limit", "offset", "page_size", "page"} <= names


# ---- tolerances ---------------------------------------------------------------------------------


def test_a_problem_without_its_own_tolerance_gives_the_default_of_its_precision(
    api, relu_problem
):
    assert relu_problem.atol is None and relu_problem.precision == "fp32"
    problem = api.get("/api/v1/problems/1/901/").json()
    assert problem["atol"] == problem["rtol"] == DEFAULT_TOLERANCE["fp32"] == 1e-4
    assert problem["tolerances"]["fp16"] == {"atol": 1e-2, "rtol": 1e-2}


def test_a_problem_with_its_own_tolerance_gives_it(api, relu_problem):
    Problem.objects.filter(pk=relu_problem.pk).update(atol=5e-3, precision="bf16")
    problem = api.get("/api/v1/problems/1/901/").json()
    assert problem["atol"] == 5e-3
    assert problem["rtol"] == DEFAULT_TOLERANCE["bf16"]  # not overridden: the default
    assert problem["tolerances"]["fp32"] == {"atol": 5e-3, "rtol": 1e-4}
