"""Helpers for the API tests: a client that checks every response against the OpenAPI schema
that drf-spectacular generates, and API tokens."""

import functools
import json
import re

from drf_spectacular.generators import SchemaGenerator
from jsonschema import Draft202012Validator
from rest_framework.test import APIClient

from accounts.services import api_token_create

# Paths that are not DRF views and so not in the schema (the event stream is text/event-stream).
UNDOCUMENTED = (re.compile(r"^/api/v1/submissions/\d+/events/$"),)


@functools.cache
def openapi_schema() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


def to_json_schema(node):
    """OpenAPI 3.0's `nullable` is not JSON Schema; spell it as a union with null."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: to_json_schema(value) for key, value in node.items()}
    if node.pop("nullable", False):
        if "enum" in node:
            node["enum"] = [*node["enum"], None]
        if "type" in node:
            node["type"] = [node["type"], "null"]
        else:
            node = {"anyOf": [node, {"type": "null"}]}
    return node


@functools.cache
def _operations() -> list[tuple[re.Pattern, str]]:
    paths = sorted(openapi_schema()["paths"], key=lambda p: (p.count("{"), p))
    # Every parameter is one segment (a problem's slug is two: level{level}/{name}).
    segment = [(r"\{[^}]+\}", "[^/]+")]
    return [(re.compile("^" + _fill(p, segment) + "$"), p) for p in paths]


def _fill(path: str, patterns: list[tuple[str, str]]) -> str:
    for parameter, pattern in patterns:
        path = re.sub(parameter, pattern, path)
    return path


def response_schema(method: str, path: str, status: int) -> dict | None:
    """The schema of this answer; fails when the schema does not document it at all."""
    schema = openapi_schema()
    for pattern, template in _operations():
        if pattern.match(path):
            operation = schema["paths"][template].get(method.lower())
            assert operation, f"{method} {template} is not in the OpenAPI schema"
            responses = operation["responses"]
            assert str(status) in responses, (
                f"{method} {template} answered {status}, which the schema does not list "
                f"(it lists {sorted(responses)})"
            )
            content = responses[str(status)].get("content", {})
            return content.get("application/json", {}).get("schema")
    raise AssertionError(f"{path} is not in the OpenAPI schema")


def check_against_schema(method: str, path: str, response) -> None:
    if not path.startswith("/api/v1/") or any(p.match(path) for p in UNDOCUMENTED):
        return
    schema = response_schema(method, path, response.status_code)
    if schema is None:
        return
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = json.loads(response.content)
    components = to_json_schema(openapi_schema()["components"])
    root = {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "components": components, **to_json_schema(schema)}
    errors = sorted(Draft202012Validator(root).iter_errors(body), key=str)
    assert not errors, (
        f"{method} {path} -> {response.status_code} does not match the schema: "
        + "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
    )


class SchemaCheckedClient(APIClient):
    """DRF's test client; every answer from /api/v1/ is checked against the schema."""

    def request(self, **kwargs):
        response = super().request(**kwargs)
        check_against_schema(kwargs["REQUEST_METHOD"], kwargs["PATH_INFO"], response)
        return response

    def with_token(self, key: str) -> "SchemaCheckedClient":
        self.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        return self


def token_for(user, scopes: tuple[str, ...] = ("read", "submit")) -> str:
    _, key = api_token_create(user=user, name="test", scopes=list(scopes))
    return key
