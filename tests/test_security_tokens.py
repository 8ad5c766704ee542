"""API tokens (stored hashed, scoped, revocable, tied to an active user) and CSRF protection of
every session view that changes something."""

import hashlib

import pytest
from django.test import Client
from django_q.models import OrmQ

from accounts.models import ApiToken
from submissions.models import Submission
from tests.api_support import token_for
from tests.conftest import kernel_source

pytestmark = pytest.mark.django_db

RELU = kernel_source("relu_correct.py")
PAYLOAD = {"level": 1, "number": 901, "backend": "torch", "hardware": "cpu", "source": RELU}


@pytest.fixture
def ready(cpu_hardware, relu_problem):
    return relu_problem


def with_header(value: str) -> Client:
    return Client(HTTP_AUTHORIZATION=value)


def submit(client: Client):
    return client.post("/api/v1/submissions/", PAYLOAD, content_type="application/json")


def test_a_token_is_stored_only_as_its_sha256(user):
    key = token_for(user)
    token = ApiToken.objects.get()
    assert token.key_hash == hashlib.sha256(key.encode()).hexdigest()
    stored = " ".join(str(value) for value in ApiToken.objects.values().get().values())
    assert key not in stored
    assert key[10:] not in stored  # only a short prefix is kept, to tell tokens apart


def test_a_read_token_cannot_submit_and_nothing_is_stored(user, ready):
    client = with_header(f"Token {token_for(user, scopes=('read',))}")
    response = submit(client)
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    assert "'submit' scope" in response.json()["detail"]
    batch = client.post("/api/v1/submissions/batch/", {"submissions": [PAYLOAD]},
                        content_type="application/json")
    assert batch.status_code == 403
    assert Submission.objects.count() == 0 and OrmQ.objects.count() == 0
    assert client.get("/api/v1/submissions/").status_code == 200


def test_a_submit_only_token_cannot_read(user, ready):
    client = with_header(f"Token {token_for(user, scopes=('submit',))}")
    assert submit(client).status_code == 202
    for path in ("/api/v1/submissions/", "/api/v1/problems/", "/api/v1/quota/",
                 f"/api/v1/submissions/{Submission.objects.get().pk}/"):
        assert client.get(path).status_code == 403, path


def test_a_revoked_token_is_refused_everywhere_at_once(client, user, ready):
    key = token_for(user)
    token = ApiToken.objects.get()
    assert submit(with_header(f"Token {key}")).status_code == 202
    client.force_login(user)
    assert client.post(f"/accounts/tokens/{token.pk}/revoke/").status_code == 302
    refused = with_header(f"Token {key}")
    for response in (submit(refused), refused.get("/api/v1/submissions/"),
                     refused.get(f"/api/v1/submissions/{Submission.objects.get().pk}/events/")):
        assert response.status_code == 401
        assert "revoked" in response.json()["detail"]
    assert Submission.objects.count() == 1


def test_a_token_of_a_deactivated_user_is_refused(user, ready):
    key = token_for(user)
    user.is_active = False
    user.save()
    assert submit(with_header(f"Token {key}")).status_code == 401


@pytest.mark.parametrize(
    "header",
    ["Token", "Token a b", "Token kb_unknown", "token kb_unknown", "Token kb_\u00ff",
     "Bearer kb_whatever", "Basic dXNlcjpwYXNz"],
)
def test_missing_malformed_or_unknown_credentials_cannot_submit(ready, header):
    response = submit(with_header(header))
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Token")
    assert Submission.objects.count() == 0


def test_a_user_cannot_revoke_someone_elses_token(client, user, django_user_model):
    token_for(user)
    token = ApiToken.objects.get()
    other = django_user_model.objects.create_user("bea", password="b-long-passphrase-2")
    client.force_login(other)
    assert client.post(f"/accounts/tokens/{token.pk}/revoke/").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_a_token_does_not_open_the_session_pages(user):
    client = with_header(f"Token {token_for(user)}")
    response = client.post("/accounts/tokens/new/", {"name": "x", "scopes": ["read", "submit"]})
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert ApiToken.objects.count() == 1


# ---- CSRF ----------------------------------------------------------------------------------------


@pytest.fixture
def csrf_client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def csrf_token(client: Client) -> str:
    client.get("/accounts/profile/")
    return client.cookies["csrftoken"].value


def test_session_api_requests_need_the_csrf_token(csrf_client, ready):
    response = submit(csrf_client)
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert Submission.objects.count() == 0
    ok = csrf_client.post("/api/v1/submissions/", PAYLOAD, content_type="application/json",
                          HTTP_X_CSRFTOKEN=csrf_token(csrf_client))
    assert ok.status_code == 202


@pytest.mark.parametrize(
    ("path", "data"),
    [("/accounts/tokens/new/", {"name": "x", "scopes": ["read"]}),
     ("/accounts/tokens/{token}/revoke/", {}),
     ("/submissions/new/", {"backend": "torch", "hardware": "cpu", "source": RELU}),
     ("/accounts/logout/", {})],
)
def test_session_forms_refuse_a_post_without_the_csrf_token(csrf_client, user, ready, path, data):
    token_for(user)
    token = ApiToken.objects.get()
    data = {**data, "problem": ready.pk} if "submissions" in path else data
    response = csrf_client.post(path.format(token=token.pk), data)
    assert response.status_code == 403
    token.refresh_from_db()
    assert token.revoked_at is None
    assert ApiToken.objects.count() == 1 and Submission.objects.count() == 0
    assert csrf_client.get("/accounts/profile/").status_code == 200  # still logged in
