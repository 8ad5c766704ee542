"""Email verification before a new account may submit (issue 63): ACCOUNT_EMAIL_VERIFICATION,
the signed and expiring link, the profile page's state and resend, and may_submit."""

import re
import smtplib
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model
from django.core import signing
from django.test import Client

from accounts.models import EmailVerification
from accounts.services import RESEND_SECONDS, VERIFICATION_SALT, may_submit

pytestmark = pytest.mark.django_db

PASSWORD = "compilers-are-fun-42"
LINK = re.compile(r"https?://testserver(/accounts/verify-email/([^/\s]+)/)")


@pytest.fixture(autouse=True)
def verification_required(settings):
    settings.ACCOUNT_EMAIL_VERIFICATION = "required"
    settings.ACCOUNT_EMAIL_VERIFICATION_HOURS = 48
    settings.SIGNUP_THROTTLE_PER_HOUR = 5


def sign_up(client: Client, username: str = "grace", email: str = "grace@example.org"):
    return client.post(
        "/accounts/signup/",
        {"username": username, "email": email, "password1": PASSWORD, "password2": PASSWORD},
    )


def link_in(message) -> str:
    return LINK.search(message.body).group(1)


@pytest.fixture
def newcomer(mailoutbox):
    """A client logged in as an account that has just signed up, and its user."""
    client = Client()
    assert sign_up(client).status_code == 302
    return client, get_user_model().objects.get(username="grace")


def test_sign_up_asks_for_an_email_and_sends_a_link_there(mailoutbox):
    client = Client()
    assert 'name="email"' in client.get("/accounts/signup/").content.decode()
    missing = client.post(
        "/accounts/signup/",
        {"username": "grace", "password1": PASSWORD, "password2": PASSWORD},
    )
    assert missing.status_code == 200 and b"errorlist" in missing.content
    assert not get_user_model().objects.exists() and mailoutbox == []

    assert sign_up(client).status_code == 302
    user = get_user_model().objects.get(username="grace")
    assert user.email == "grace@example.org"
    [message] = mailoutbox
    assert message.to == ["grace@example.org"]
    assert "48 hours" in message.body and link_in(message)
    # Logged in, and told what is missing.
    profile = client.get("/accounts/profile/").content.decode()
    assert "not verified" in profile and "grace@example.org" in profile
    assert 'id="email-resend"' in profile


def test_an_unverified_account_may_not_submit_and_is_told_why(newcomer):
    _, user = newcomer
    allowed, reason = may_submit(user=user)
    assert allowed is False
    assert "Verify your email address (grace@example.org)" in reason


def test_following_the_link_verifies_the_address_and_lets_the_account_submit(newcomer,
                                                                             mailoutbox):
    client, user = newcomer
    # Often opened in another browser: no login needed.
    response = Client().get(link_in(mailoutbox[0]))
    assert response.status_code == 200
    assert "grace@example.org is verified for grace" in response.content.decode()
    assert EmailVerification.objects.get(user=user).verified_at is not None
    assert may_submit(user=user) == (True, "")
    profile = client.get("/accounts/profile/").content.decode()
    assert "verified" in profile and "not verified" not in profile
    assert 'id="email-resend"' not in profile
    # Following it again changes nothing.
    assert Client().get(link_in(mailoutbox[0])).status_code == 200


def test_an_expired_link_is_refused(newcomer, mailoutbox, monkeypatch):
    client, user = newcomer
    EmailVerification.objects.filter(user=user).update(sent_at=None)
    # A link made 49 hours ago: signing stamps tokens with time.time().
    made = time.time() - 49 * 3600
    monkeypatch.setattr(signing, "time", SimpleNamespace(time=lambda: made))
    client.post("/accounts/verify-email/send/")
    monkeypatch.undo()
    response = Client().get(link_in(mailoutbox[-1]))
    assert response.status_code == 400
    assert "This link has expired" in response.content.decode()
    assert EmailVerification.objects.get(user=user).verified_at is None
    assert may_submit(user=user)[0] is False


def test_a_tampered_or_foreign_link_is_refused(newcomer, mailoutbox):
    _, user = newcomer
    path = link_in(mailoutbox[0])
    token = LINK.search(mailoutbox[0].body).group(2)
    body, signature = token.rsplit(":", 1)
    other_account = signing.dumps({"user": user.pk + 1, "email": "grace@example.org"})
    forged = [
        path.replace(signature, signature[:-1] + ("A" if signature[-1] != "A" else "B")),
        f"/accounts/verify-email/{body}/",
        # The right payload, signed for another purpose (no salt) or not signed at all.
        f"/accounts/verify-email/{signing.dumps({'user': user.pk, 'email': user.email})}/",
        f"/accounts/verify-email/{other_account}/",
        "/accounts/verify-email/x/",
    ]
    for forgery in forged:
        response = Client().get(forgery)
        assert response.status_code == 400, forgery
        assert "not valid" in response.content.decode()
    assert EmailVerification.objects.get(user=user).verified_at is None
    assert may_submit(user=user)[0] is False


def test_a_link_for_an_address_the_account_no_longer_has_is_refused(newcomer, mailoutbox):
    _, user = newcomer
    user.email = "grace@elsewhere.example"
    user.save()
    response = Client().get(link_in(mailoutbox[0]))
    assert response.status_code == 400
    assert "no longer has" in response.content.decode()
    assert may_submit(user=user)[0] is False


def test_changing_a_verified_address_needs_a_new_link(newcomer, mailoutbox):
    _, user = newcomer
    Client().get(link_in(mailoutbox[0]))
    user.email = "grace@elsewhere.example"
    user.save()
    assert may_submit(user=user)[0] is False
    signed = signing.dumps({"user": user.pk, "email": user.email}, salt=VERIFICATION_SALT)
    assert Client().get(f"/accounts/verify-email/{signed}/").status_code == 200
    assert may_submit(user=user) == (True, "")


def test_the_profile_page_sends_a_new_link_at_most_once_a_minute(newcomer, mailoutbox):
    client, user = newcomer
    response = client.post("/accounts/verify-email/send/", follow=True)
    assert "less than a minute ago" in response.content.decode()
    assert len(mailoutbox) == 1
    earlier = EmailVerification.objects.get(user=user).sent_at - timedelta(
        seconds=RESEND_SECONDS
    )
    EmailVerification.objects.filter(user=user).update(sent_at=earlier)
    response = client.post("/accounts/verify-email/send/", follow=True)
    assert "A new link is on its way to grace@example.org" in response.content.decode()
    assert len(mailoutbox) == 2
    # The new link works as the first would have.
    assert Client().get(link_in(mailoutbox[1])).status_code == 200
    assert may_submit(user=user) == (True, "")


def test_a_mail_server_that_fails_leaves_the_account_to_ask_again(monkeypatch, mailoutbox):
    def refuse(*args, **kwargs):
        raise smtplib.SMTPServerDisconnected("gone")

    monkeypatch.setattr("accounts.services.send_mail", refuse)
    client = Client()
    assert sign_up(client).status_code == 302
    user = get_user_model().objects.get(username="grace")
    assert EmailVerification.objects.get(user=user).sent_at is None
    monkeypatch.undo()
    client.post("/accounts/verify-email/send/")  # at once: nothing went out the first time
    assert len(mailoutbox) == 1 and mailoutbox[0].to == ["grace@example.org"]


def test_one_email_address_makes_one_account(newcomer):
    response = sign_up(Client(), username="grace2", email="GRACE@example.org")
    assert response.status_code == 200
    assert "exists already" in response.content.decode()
    assert not get_user_model().objects.filter(username="grace2").exists()


def test_staff_and_accounts_without_a_check_may_submit(newcomer, user):
    _, grace = newcomer
    assert may_submit(user=user) == (True, "")  # made by an operator: no check to pass
    grace.is_staff = True
    grace.save()
    assert may_submit(user=grace) == (True, "")


def test_an_inactive_or_anonymous_user_may_not_submit(user):
    from django.contrib.auth.models import AnonymousUser

    assert may_submit(user=AnonymousUser())[0] is False
    user.is_active = False
    user.save()
    assert may_submit(user=user) == (False, "This account is disabled.")


def test_with_verification_off_sign_up_asks_for_no_email_and_nobody_waits(
    newcomer, settings, mailoutbox
):
    _, grace = newcomer
    settings.ACCOUNT_EMAIL_VERIFICATION = "none"
    assert may_submit(user=grace) == (True, "")  # turned off: pending accounts may submit
    client = Client()
    assert 'name="email"' not in client.get("/accounts/signup/").content.decode()
    response = client.post(
        "/accounts/signup/",
        {"username": "hopper", "password1": PASSWORD, "password2": PASSWORD},
    )
    assert response.status_code == 302
    hopper = get_user_model().objects.get(username="hopper")
    assert not EmailVerification.objects.filter(user=hopper).exists()
    assert len(mailoutbox) == 1  # grace's alone
    assert may_submit(user=hopper) == (True, "")
    assert "Email address" not in client.get("/accounts/profile/").content.decode()


def test_an_unverified_account_is_refused_by_the_api_and_the_batch_with_why_and_nothing_stored(
        newcomer, cpu_hardware, relu_problem):
    from django_q.models import OrmQ

    from submissions.models import Submission
    from tests.api_support import SchemaCheckedClient, token_for
    from tests.conftest import kernel_source

    _, user = newcomer
    api = SchemaCheckedClient().with_token(token_for(user))
    item = {"level": 1, "number": 901, "backend": "torch", "hardware": "cpu",
            "source": kernel_source("relu_correct.py")}
    one = api.post("/api/v1/submissions/", item, format="json")
    assert one.status_code == 403, one.content
    assert "Verify your email address" in one.json()["detail"]
    batch = api.post("/api/v1/submissions/batch/", {"submissions": [item]}, format="json")
    assert batch.status_code == 403, batch.content
    assert Submission.objects.count() == 0 and OrmQ.objects.count() == 0
