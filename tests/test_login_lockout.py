"""Login brute force (django-axes): five failures for one username from one address lock that
pair out for 15 minutes, with the reason on the login page; API tokens are not affected."""

import pytest
from django.test import Client

from tests.api_support import token_for

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-passphrase-1"


def log_in(client: Client, password: str, username: str = "ada"):
    return client.post("/accounts/login/", {"username": username, "password": password})


def test_it_locks_a_username_out_after_five_failures_and_says_so_on_the_login_page(user):
    client = Client()
    for _ in range(4):
        assert log_in(client, "wrong").status_code == 200  # the form again, with its error
    locked = log_in(client, "wrong")
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Too many failed login attempts" in page and "15 minutes" in page
    assert '<form method="post"' in page  # still the site's login page
    # Even the right password is refused while the lockout lasts.
    assert log_in(client, PASSWORD).status_code == 429
    assert "_auth_user_id" not in client.session


def test_it_locks_the_username_and_address_pair_alone(user, django_user_model):
    django_user_model.objects.create_user(username="bob", password=PASSWORD)
    client = Client()
    for _ in range(5):
        log_in(client, "wrong")
    assert log_in(client, PASSWORD, username="bob").status_code == 302  # another user logs in
    elsewhere = Client(REMOTE_ADDR="10.0.0.9")
    assert log_in(elsewhere, PASSWORD).status_code == 302  # the same user from elsewhere


def test_it_forgets_the_failures_after_a_successful_login(user):
    client = Client()
    for _ in range(4):
        log_in(client, "wrong")
    assert log_in(client, PASSWORD).status_code == 302
    client.logout()
    for _ in range(4):
        log_in(client, "wrong")
    assert log_in(client, PASSWORD).status_code == 302


def test_it_leaves_api_token_authentication_alone(user, cpu_hardware):
    token = token_for(user)
    client = Client()
    for _ in range(6):
        log_in(client, "wrong")
    assert log_in(client, PASSWORD).status_code == 429
    api = Client(HTTP_AUTHORIZATION=f"Token {token}")
    assert api.get("/api/v1/quota/").status_code == 200
    assert Client(HTTP_AUTHORIZATION="Token not-a-token").get("/api/v1/quota/").status_code == 401
