"""Revoking an API token through the API: DELETE /api/v1/tokens/ID/
(accounts.api.TokenDetailApi).

Every answer is checked against the OpenAPI schema (tests/api_support.SchemaCheckedClient), so
each status code below must be one the schema lists.
"""

import base64

import pytest
from django.contrib.auth import get_user_model

from accounts.models import ApiToken
from accounts.services import api_token_create
from tests.api_support import SchemaCheckedClient, openapi_schema

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-passphrase-1"  # the `user` fixture's


def client_with(header: str) -> SchemaCheckedClient:
    client = SchemaCheckedClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    return client


def make_token(user, name: str = "agent", scopes=("read", "submit")) -> tuple[ApiToken, str]:
    return api_token_create(user=user, name=name, scopes=list(scopes))


def test_a_logged_in_user_revokes_a_token_and_its_key_stops_working(user):
    token, key = make_token(user)
    client = SchemaCheckedClient()
    client.force_login(user)

    response = client.delete(f"/api/v1/tokens/{token.pk}/")

    assert response.status_code == 204, response.content
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert client_with(f"Bearer {key}").get("/api/v1/quota/").status_code == 401
    assert client.get("/api/v1/tokens/").json() == []


def test_a_token_revokes_itself(user):
    token, key = make_token(user)
    agent = client_with(f"Bearer {key}")

    assert agent.delete(f"/api/v1/tokens/{token.pk}/").status_code == 204
    assert agent.get("/api/v1/quota/").status_code == 401


def test_revoking_twice_keeps_the_first_time(user):
    token, _ = make_token(user)
    client = SchemaCheckedClient()
    client.force_login(user)
    assert client.delete(f"/api/v1/tokens/{token.pk}/").status_code == 204
    first = ApiToken.objects.get(pk=token.pk).revoked_at

    assert client.delete(f"/api/v1/tokens/{token.pk}/").status_code == 204
    assert ApiToken.objects.get(pk=token.pk).revoked_at == first


def test_another_users_token_is_not_found_and_stays_live(user):
    other = get_user_model().objects.create_user(username="bob", password=PASSWORD)
    theirs, their_key = make_token(other)
    _, my_key = make_token(user)

    response = client_with(f"Bearer {my_key}").delete(f"/api/v1/tokens/{theirs.pk}/")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert ApiToken.objects.get(pk=theirs.pk).revoked_at is None
    assert client_with(f"Bearer {their_key}").get("/api/v1/quota/").status_code == 200


def test_an_unknown_id_is_not_found(user):
    client = SchemaCheckedClient()
    client.force_login(user)
    assert client.delete("/api/v1/tokens/999999/").status_code == 404


def test_a_read_only_token_cannot_revoke(user):
    token, _ = make_token(user, name="target")
    _, read_key = make_token(user, name="reader", scopes=("read",))

    response = client_with(f"Bearer {read_key}").delete(f"/api/v1/tokens/{token.pk}/")

    assert response.status_code == 403
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None


def test_an_agent_revokes_with_its_username_and_password(user):
    token, _ = make_token(user)
    basic = "Basic " + base64.b64encode(f"ada:{PASSWORD}".encode()).decode()

    assert client_with(basic).delete(f"/api/v1/tokens/{token.pk}/").status_code == 204
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None


def test_an_anonymous_request_revokes_nothing(user):
    token, _ = make_token(user)

    response = SchemaCheckedClient().delete(f"/api/v1/tokens/{token.pk}/")

    assert response.status_code in (401, 403)
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None


def test_the_schema_documents_revoking():
    operation = openapi_schema()["paths"]["/api/v1/tokens/{id}/"]["delete"]
    assert operation["operationId"] == "tokens_revoke"
    assert {"204", "401", "403", "404"} <= set(operation["responses"])
