"""API tokens through the API: `Authorization: Bearer KEY` beside `Token KEY`, and
POST /api/v1/tokens/ for a user logged in by session, password (HTTP Basic) or another token."""

import base64

import pytest

from accounts.models import ApiToken
from tests.api_support import SchemaCheckedClient, openapi_schema, token_for

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-passphrase-1"  # the `user` fixture's


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def client_with(header: str) -> SchemaCheckedClient:
    client = SchemaCheckedClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    return client


# ---- Bearer -------------------------------------------------------------------------------------


def test_a_bearer_token_reads_the_api_like_a_token_one(user, cpu_hardware):
    key = token_for(user)
    for scheme in ("Bearer", "bearer", "Token"):
        response = client_with(f"{scheme} {key}").get("/api/v1/quota/")
        assert response.status_code == 200, (scheme, response.content)


def test_a_bearer_token_submits(user, cpu_hardware, relu_problem):
    from tests.conftest import kernel_source

    response = client_with(f"Bearer {token_for(user)}").post(
        "/api/v1/submissions/",
        {"level": 1, "number": 901, "backend": "torch", "hardware": "cpu",
         "source": kernel_source("relu_correct.py")},
        format="json",
    )
    assert response.status_code == 202, response.content


def test_an_unknown_bearer_key_is_refused_with_401(user):
    response = client_with("Bearer kb_not_a_key").get("/api/v1/quota/")
    assert response.status_code == 401
    assert "unknown or was revoked" in response.json()["detail"]


def test_a_malformed_bearer_header_says_how_to_send_it(user):
    response = client_with("Bearer two parts").get("/api/v1/quota/")
    assert response.status_code == 401
    assert "Bearer KEY" in response.json()["detail"]


def test_a_revoked_key_is_refused_as_bearer_too(user):
    key = token_for(user)
    ApiToken.objects.get(user=user).revoke()
    assert client_with(f"Bearer {key}").get("/api/v1/quota/").status_code == 401


def test_the_event_stream_takes_a_bearer_token(user, cpu_hardware, relu_problem):
    from submissions.services import submission_create
    from tests.conftest import kernel_source

    submission = submission_create(user=user, problem=relu_problem, backend="torch",
                                   hardware=cpu_hardware, source=kernel_source("relu_correct.py"))
    submission.mark_finished(verdict="correct")
    url = f"/api/v1/submissions/{submission.pk}/events/"
    assert client_with("Bearer kb_not_a_key").get(url).status_code == 401
    response = client_with(f"Bearer {token_for(user)}").get(url)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")


def test_the_schema_documents_bearer_and_token_as_alternatives():
    schema = openapi_schema()
    schemes = schema["components"]["securitySchemes"]
    assert schemes["bearerAuth"] == {**schemes["bearerAuth"], "type": "http", "scheme": "bearer"}
    assert schemes["tokenAuth"]["type"] == "apiKey"
    security = schema["paths"]["/api/v1/quota/"]["get"]["security"]
    assert {"bearerAuth": []} in security and {"tokenAuth": []} in security  # either, not both


# ---- creating a token ---------------------------------------------------------------------------


def test_a_logged_in_user_creates_a_token_and_sees_its_key_once(user):
    client = SchemaCheckedClient()
    client.force_login(user)
    response = client.post("/api/v1/tokens/", {"name": "my agent"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["name"] == "my agent" and body["scopes"] == ["read", "submit"]
    assert body["key"].startswith(body["prefix"])
    token = ApiToken.objects.get(pk=body["id"])
    assert token.user == user and token.key_hash == ApiToken.hash_key(body["key"])
    # The key works, and is never shown again.
    assert client_with(f"Bearer {body['key']}").get("/api/v1/quota/").status_code == 200
    listing = client.get("/api/v1/tokens/").json()
    assert [t["id"] for t in listing] == [body["id"]]
    assert "key" not in listing[0] and body["key"] not in str(listing)


def test_a_session_needs_its_csrf_token_to_create_one(user):
    client = SchemaCheckedClient(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post("/api/v1/tokens/", {}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert not ApiToken.objects.exists()


def test_an_agent_creates_a_token_with_its_username_and_password(user):
    response = client_with(basic("ada", PASSWORD)).post(
        "/api/v1/tokens/", {"name": "agent", "scopes": ["read"]}, format="json"
    )
    assert response.status_code == 201, response.content
    assert ApiToken.objects.get().scopes == ["read"]


def test_a_wrong_password_creates_nothing(user):
    response = client_with(basic("ada", "wrong")).post("/api/v1/tokens/", {}, format="json")
    assert response.status_code == 401
    assert not ApiToken.objects.exists()


def test_wrong_passwords_lock_the_account_out_of_the_token_endpoint_too(user):
    for _ in range(5):
        client_with(basic("ada", "wrong")).post("/api/v1/tokens/", {}, format="json")
    response = client_with(basic("ada", PASSWORD)).post("/api/v1/tokens/", {}, format="json")
    assert response.status_code == 429
    assert "Too many failed logins" in response.json()["detail"]
    assert int(response["Retry-After"]) == 15 * 60
    assert not ApiToken.objects.exists()


def test_a_password_is_taken_by_the_token_endpoint_only(user):
    assert client_with(basic("ada", PASSWORD)).get("/api/v1/quota/").status_code == 401


def test_a_token_creates_a_token_with_no_more_scopes_than_it_has(user):
    full = client_with(f"Bearer {token_for(user)}")
    assert full.post("/api/v1/tokens/", {"scopes": ["read"]}, format="json").status_code == 201
    # A read-only token may not write at all, so it cannot mint a token either.
    reader = client_with(f"Bearer {token_for(user, scopes=('read',))}")
    response = reader.post("/api/v1/tokens/", {"scopes": ["read"]}, format="json")
    assert response.status_code == 403
    assert ApiToken.objects.count() == 3


def test_a_submit_only_token_cannot_create_a_read_token(user):
    writer = client_with(f"Bearer {token_for(user, scopes=('submit',))}")
    response = writer.post("/api/v1/tokens/", {"scopes": ["read", "submit"]}, format="json")
    assert response.status_code == 403
    assert "read" in response.json()["detail"]
    assert ApiToken.objects.count() == 1


def test_it_refuses_an_unknown_scope(user):
    client = SchemaCheckedClient()
    client.force_login(user)
    response = client.post("/api/v1/tokens/", {"scopes": ["admin"]}, format="json")
    assert response.status_code == 400
    assert "scopes" in response.json()["errors"]
    assert not ApiToken.objects.exists()


def test_an_anonymous_request_creates_no_token(db):
    response = SchemaCheckedClient().post("/api/v1/tokens/", {}, format="json")
    assert response.status_code == 401
    assert not ApiToken.objects.exists()


def test_the_schema_documents_token_creation():
    operation = openapi_schema()["paths"]["/api/v1/tokens/"]["post"]
    assert operation["operationId"] == "tokens_create"
    assert "201" in operation["responses"]
    assert {"basicAuth": []} in operation["security"]
