"""Sign up, log in and out, the profile page's API tokens, and `manage.py create_token`."""

import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from accounts.models import ApiToken
from tests.api_support import SchemaCheckedClient

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-passphrase-1"


@pytest.fixture
def browser_client(user):
    client = Client()
    client.force_login(user)
    return client


def api_status(key: str) -> int:
    return SchemaCheckedClient().with_token(key).get("/api/v1/submissions/").status_code


def test_signing_up_creates_the_account_and_logs_in():
    client = Client()
    response = client.post(
        "/accounts/signup/",
        {"username": "grace", "password1": "compilers-are-fun-42", "password2":
         "compilers-are-fun-42"},
    )
    assert response.status_code == 302 and response["Location"] == "/accounts/profile/"
    assert get_user_model().objects.filter(username="grace").exists()
    assert client.get("/accounts/profile/").status_code == 200


def test_a_weak_or_mismatched_password_is_refused():
    response = Client().post(
        "/accounts/signup/", {"username": "grace", "password1": "abc", "password2": "abd"}
    )
    assert response.status_code == 200
    assert b"errorlist" in response.content
    assert not get_user_model().objects.filter(username="grace").exists()


def test_logging_in_and_out(user):
    client = Client()
    response = client.post("/accounts/login/", {"username": "ada", "password": PASSWORD})
    assert response.status_code == 302
    assert client.get("/accounts/profile/").status_code == 200
    client.post("/accounts/logout/")
    assert client.get("/accounts/profile/").status_code == 302


def test_the_profile_needs_a_login():
    response = Client().get("/accounts/profile/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_a_new_token_is_shown_once_and_stored_only_as_a_hash(browser_client, user):
    response = browser_client.post(
        "/accounts/tokens/new/", {"name": "my agent", "scopes": ["read", "submit"]}
    )
    assert response.status_code == 200
    key = re.search(r'id="new-token-key">(kb_[\w-]+)<', response.content.decode()).group(1)
    token = ApiToken.objects.get(user=user)
    assert token.name == "my agent" and token.scopes == ["read", "submit"]
    assert token.key_hash == ApiToken.hash_key(key) and key not in token.key_hash
    assert key.startswith(token.prefix)
    assert "no-store" in response["Cache-Control"]
    # The key is never shown again.
    assert key not in browser_client.get("/accounts/profile/").content.decode()
    assert api_status(key) == 200


def test_a_token_needs_at_least_one_scope(browser_client):
    response = browser_client.post("/accounts/tokens/new/", {"name": "none", "scopes": []})
    assert response.status_code == 400
    assert ApiToken.objects.count() == 0


def test_a_revoked_token_stops_working(browser_client, user):
    token, key = ApiToken.issue(user=user)
    assert api_status(key) == 200
    response = browser_client.post(f"/accounts/tokens/{token.pk}/revoke/")
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert api_status(key) == 401
    assert "revoked" in browser_client.get("/accounts/profile/").content.decode()


def test_nobody_revokes_someone_elses_token(browser_client):
    other = get_user_model().objects.create_user("bob", password="another-passphrase-2")
    token, key = ApiToken.issue(user=other)
    response = browser_client.post(f"/accounts/tokens/{token.pk}/revoke/")
    assert response.status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None and api_status(key) == 200


def test_token_forms_keep_csrf_protection(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post("/accounts/tokens/new/", {"name": "x", "scopes": ["read"]})
    assert response.status_code == 403
    assert ApiToken.objects.count() == 0


def test_revoking_needs_a_post(browser_client, user):
    token, _ = ApiToken.issue(user=user)
    assert browser_client.get(f"/accounts/tokens/{token.pk}/revoke/").status_code == 405
    token.refresh_from_db()
    assert token.revoked_at is None


def test_create_token_prints_a_working_key(user):
    out, err = StringIO(), StringIO()
    call_command("create_token", "ada", "--scopes", "read", stdout=out, stderr=err)
    key = out.getvalue().strip()
    token = ApiToken.objects.get(user=user)
    assert token.key_hash == ApiToken.hash_key(key) and token.scopes == ["read"]
    assert api_status(key) == 200
    assert "not shown again" in err.getvalue()


def test_create_token_can_create_the_user():
    out = StringIO()
    call_command("create_token", "agent-7", "--create-user", stdout=out, stderr=StringIO())
    agent = get_user_model().objects.get(username="agent-7")
    assert not agent.has_usable_password()
    assert ApiToken.objects.get(user=agent).key_hash == ApiToken.hash_key(out.getvalue().strip())


def test_create_token_refuses_an_unknown_user_or_scope(user):
    with pytest.raises(CommandError, match="--create-user"):
        call_command("create_token", "nobody", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match="scope"):
        call_command("create_token", "ada", "--scopes", "admin", stdout=StringIO(),
                     stderr=StringIO())
    assert ApiToken.objects.count() == 0
