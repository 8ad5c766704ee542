"""A deeply nested JSON body is a 400 that says why, on every API endpoint, never a 500."""

import pytest
from django.test import Client

from kbsite.parsers import MAX_DEPTH, json_depth_exceeds
from tests.api_support import token_for

pytestmark = pytest.mark.django_db

DEEP = "[" * 2000 + "]" * 2000


@pytest.mark.parametrize(
    "url", ["/api/v1/submissions/", "/api/v1/submissions/batch/", "/api/v1/runs/"]
)
def test_it_refuses_2000_levels_of_nesting_with_a_400(url, user, cpu_hardware):
    user.is_staff = True  # model runs are started by staff
    user.save(update_fields=["is_staff"])
    client = Client(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    body = '{"source": ' + DEEP + "}"
    response = client.post(url, body, content_type="application/json")
    assert response.status_code == 400, response.content
    error = response.json()
    assert error["code"] == "too_deep"
    assert f"more than {MAX_DEPTH} levels deep" in error["detail"]


def test_it_counts_brackets_inside_strings_as_text():
    assert not json_depth_exceeds('{"source": "' + "[" * 5000 + '"}')
    assert json_depth_exceeds("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert not json_depth_exceeds("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert not json_depth_exceeds('{"a": "\\"[[["}')
