"""The OpenAPI schema: valid, complete, served, documented; and the check that the other API
tests run on every response (tests/api_support.py) really catches a wrong answer."""

import json
import re

import pytest
from django.http import JsonResponse
from django.test import Client
from drf_spectacular.validation import validate_schema

from tests.api_support import check_against_schema, openapi_schema

pytestmark = pytest.mark.django_db

ENDPOINTS = {
    "/api/v1/problems/": {"get"},
    # A problem by its slug (level1/19_ReLU) and by its level and number (tests/
    # test_problem_names.py asks each form).
    "/api/v1/problems/level{level}/{name}/": {"get"},
    "/api/v1/problems/{level}/{number}/": {"get"},
    "/api/v1/problems/level{level}/{name}/starter/": {"get"},
    "/api/v1/problems/{level}/{number}/starter/": {"get"},
    "/api/v1/hardware/": {"get"},
    "/api/v1/submissions/": {"get", "post"},
    "/api/v1/submissions/batch/": {"post"},
    "/api/v1/submissions/{id}/": {"get"},
}


def test_the_schema_is_valid_openapi():
    validate_schema(openapi_schema())


def test_the_schema_lists_every_endpoint_with_its_errors():
    paths = openapi_schema()["paths"]
    for path, methods in ENDPOINTS.items():
        assert set(paths[path]) >= methods, path
        for method in methods:
            responses = paths[path][method]["responses"]
            assert {"401", "429"} <= set(responses), (method, path)
    create = paths["/api/v1/submissions/"]["post"]
    assert {"202", "400", "401", "403", "409", "413", "429"} <= set(create["responses"])
    assert any(p["name"] == "Idempotency-Key" for p in create["parameters"])
    assert "tokenAuth" in openapi_schema()["components"]["securitySchemes"]


def test_the_schema_is_served():
    response = Client().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    assert "/api/v1/submissions/" in json.loads(response.content)["paths"]


def test_the_docs_page_loads_nothing_from_other_sites():
    response = Client().get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "/api/v1/submissions/" in html or "/api/schema/" in html
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets
    outside = [a for a in assets if re.match(r"^(https?:)?//", a)]
    assert outside == []


def test_the_check_fails_an_answer_that_breaks_the_schema():
    wrong_type = JsonResponse({"level": "one", "slug": 7})
    with pytest.raises(AssertionError, match="does not match the schema"):
        check_against_schema("GET", "/api/v1/problems/1/901/", wrong_type)
    undocumented = JsonResponse({"detail": "x", "code": "teapot"}, status=418)
    with pytest.raises(AssertionError, match="does not list"):
        check_against_schema("GET", "/api/v1/problems/1/901/", undocumented)
    unknown = JsonResponse({})
    with pytest.raises(AssertionError, match="not in the OpenAPI schema"):
        check_against_schema("GET", "/api/v1/nowhere/", unknown)


def test_with_the_sidecar_the_docs_page_is_swagger_ui_from_local_static_files():
    response = Client().get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert [a for a in assets if re.match(r"^(https?:)?//", a)] == []


def test_the_schema_lists_the_backends_of_the_table_where_a_backend_is_given():
    from evaluator import backends

    schemas = openapi_schema()["components"]["schemas"]
    assert schemas["BackendEnum"]["enum"] == list(backends.NAMES)
    for name in ("SubmissionInput", "SubmissionUpload", "RunCreateInput", "EntryIn"):
        assert "#/components/schemas/BackendEnum" in json.dumps(
            schemas[name]["properties"]["backend"]), name
