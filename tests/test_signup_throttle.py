"""Sign-up is throttled per client address (issue 63): SIGNUP_THROTTLE_PER_HOUR accounts an hour
from one address, counted in the database, the address read from X-Forwarded-For only behind a
proxy named in TRUSTED_PROXIES."""

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError
from django.test import Client, RequestFactory

from accounts.models import SignupAddress
from accounts.services import signup_create
from accounts.throttling import (
    SIGNUP_WINDOW_SECONDS,
    SignupThrottled,
    client_address,
    signup_throttle_take,
    throttle_key,
)

pytestmark = pytest.mark.django_db

PASSWORD = "compilers-are-fun-42"


@pytest.fixture(autouse=True)
def five_an_hour(settings):
    settings.SIGNUP_THROTTLE_PER_HOUR = 5
    settings.TRUSTED_PROXIES = []
    settings.ACCOUNT_EMAIL_VERIFICATION = "none"


def sign_up(username: str, *, address: str = "203.0.113.5", forwarded: str = "",
            password: str = PASSWORD):
    headers = {"REMOTE_ADDR": address}
    if forwarded:
        headers["HTTP_X_FORWARDED_FOR"] = forwarded
    return Client().post(
        "/accounts/signup/",
        {"username": username, "password1": password, "password2": password},
        **headers,
    )


def usernames() -> set[str]:
    return set(get_user_model().objects.values_list("username", flat=True))


def test_the_sixth_sign_up_from_one_address_is_refused_with_429_and_creates_nothing():
    for n in range(5):
        assert sign_up(f"user{n}").status_code == 302
    response = sign_up("user5")
    assert response.status_code == 429
    assert 3500 < int(response["Retry-After"]) <= SIGNUP_WINDOW_SECONDS
    page = response.content.decode()
    assert 'id="signup-form"' in page  # the form again, saying why
    assert "Too many accounts were made from your address: at most 5 an hour" in page
    assert usernames() == {f"user{n}" for n in range(5)}
    assert response.wsgi_request.user.is_anonymous


def test_a_throttled_address_gets_its_429_even_with_a_form_that_would_be_refused():
    for n in range(5):
        sign_up(f"user{n}")
    assert sign_up("user5", password="abc").status_code == 429
    assert Client().post("/accounts/signup/", {}, REMOTE_ADDR="203.0.113.5").status_code == 429


def test_another_address_still_signs_up_while_one_is_throttled():
    for n in range(6):
        sign_up(f"user{n}", address="203.0.113.5")
    assert sign_up("elsewhere", address="198.51.100.9").status_code == 302
    assert "elsewhere" in usernames()


def test_x_forwarded_for_is_ignored_when_no_proxy_is_trusted():
    for n in range(5):
        assert sign_up(f"user{n}", forwarded=f"192.0.2.{n}").status_code == 302
    assert sign_up("user5", forwarded="192.0.2.99").status_code == 429


def test_x_forwarded_for_is_ignored_from_a_peer_that_is_not_a_trusted_proxy(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    for n in range(5):
        sign_up(f"user{n}", address="203.0.113.5", forwarded=f"192.0.2.{n}")
    assert sign_up("user5", address="203.0.113.5", forwarded="192.0.2.99").status_code == 429


def test_behind_a_trusted_proxy_each_forwarded_client_is_counted_on_its_own(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    proxy = "10.0.0.2"
    for n in range(5):
        assert sign_up(f"user{n}", address=proxy, forwarded="198.51.100.7").status_code == 302
    # What the client wrote to the left of the proxy's entry changes nothing.
    spoofed = sign_up("user5", address=proxy, forwarded="192.0.2.1, 198.51.100.7")
    assert spoofed.status_code == 429
    assert sign_up("other", address=proxy, forwarded="198.51.100.8").status_code == 302
    assert "user5" not in usernames() and "other" in usernames()


def request_from(remote: str, forwarded: str = ""):
    headers = {"REMOTE_ADDR": remote}
    if forwarded:
        headers["HTTP_X_FORWARDED_FOR"] = forwarded
    return RequestFactory().post("/accounts/signup/", **headers)


def test_the_client_address_is_the_right_most_untrusted_hop(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8", "2001:db8:ffff::1"]
    assert client_address(request_from("10.0.0.2", "192.0.2.1, 198.51.100.7, 10.0.0.3")) == (
        "198.51.100.7"
    )
    assert client_address(request_from("2001:db8:ffff::1", "198.51.100.7")) == "198.51.100.7"
    assert client_address(request_from("203.0.113.5", "198.51.100.7")) == "203.0.113.5"
    # No header, or nothing but proxies: the nearest proxy is all that is known.
    assert client_address(request_from("10.0.0.2")) == "10.0.0.2"
    assert client_address(request_from("10.0.0.2", "10.0.0.9")) == "10.0.0.9"
    # Junk where an address belongs is not believed, nor anything left of it.
    assert client_address(request_from("10.0.0.2", "198.51.100.7, not-an-ip")) == "10.0.0.2"


def test_an_ipv6_client_is_counted_by_its_64_network():
    assert throttle_key("2001:db8:1:2::1") == throttle_key("2001:db8:1:2:ffff::9")
    assert throttle_key("2001:db8:1:2::1") != throttle_key("2001:db8:1:3::1")
    assert throttle_key("::ffff:192.0.2.1") == throttle_key("192.0.2.1") == "192.0.2.1"
    for n in range(5):
        assert sign_up(f"user{n}", address=f"2001:db8:1:2::{n + 1}").status_code == 302
    assert sign_up("user5", address="2001:db8:1:2::abcd").status_code == 429


def test_a_sign_up_frees_its_place_an_hour_after_it_was_made():
    start = 1_000_000.0
    for n in range(5):
        signup_throttle_take(address="203.0.113.5", now=start + n)
    with pytest.raises(SignupThrottled) as refused:
        signup_throttle_take(address="203.0.113.5", now=start + 60)
    assert refused.value.retry_after == SIGNUP_WINDOW_SECONDS - 60
    signup_throttle_take(address="203.0.113.5", now=start + SIGNUP_WINDOW_SECONDS)
    # The row keeps only the sign-ups still inside the window.
    assert len(SignupAddress.objects.get(address="203.0.113.5").recent) == 5


def test_a_sign_up_that_fails_is_not_counted():
    get_user_model().objects.create_user("taken", password=PASSWORD)
    with pytest.raises(IntegrityError):
        signup_create(username="taken", password=PASSWORD, address="203.0.113.5")
    assert not SignupAddress.objects.exists()


def test_a_limit_of_zero_turns_the_throttle_off(settings):
    settings.SIGNUP_THROTTLE_PER_HOUR = 0
    for n in range(7):
        assert sign_up(f"user{n}").status_code == 302
    assert not SignupAddress.objects.exists()
