"""The portal in a real browser: sign up, make an API token, upload a kernel, watch it go from
queued to its verdict without a reload, and find it in the list of one's submissions."""

import re

import pytest
import requests

from accounts.models import ApiToken
from submissions.models import Submission
from tests.conftest import KERNELS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_a_new_user_signs_up_makes_a_token_submits_and_sees_the_verdict_live(
    browser, live_site, cpu_hardware, relu_problem, start_runner
):
    """Slow: a new user's whole path in a real browser, the verdict arriving from a real runner
    process."""
    page = browser.new_page()
    page.goto(f"{live_site}/accounts/signup/")
    page.fill("input[name=username]", "grace")
    page.fill("input[name=password1]", "compilers-are-fun-42")
    page.fill("input[name=password2]", "compilers-are-fun-42")
    page.click("#signup-form button[type=submit]")
    page.wait_for_url(f"{live_site}/accounts/profile/")

    # An API token: shown once, and it works.
    page.fill("#token-form input[name=name]", "laptop")
    page.click("#token-form button[type=submit]")
    key = page.text_content("#new-token-key").strip()
    assert re.fullmatch(r"kb_[\w-]+", key)
    assert ApiToken.objects.get(user__username="grace").key_hash == ApiToken.hash_key(key)
    answer = requests.get(f"{live_site}/api/v1/submissions/",
                          headers={"Authorization": f"Token {key}"}, timeout=30)
    assert answer.status_code == 200

    # Upload a kernel while no runner is up: the page shows it queued.
    page.goto(f"{live_site}/submissions/new/?problem={relu_problem.pk}")
    page.select_option("#submission-form select[name=backend]", "torch")
    page.select_option("#submission-form select[name=hardware]", "cpu")
    page.set_input_files("input[name=source_file]", str(KERNELS / "relu_correct.py"))
    page.click("#submission-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/submissions/\d+/$"))
    submission = Submission.objects.get()
    assert page.text_content("#status").strip() == "queued"
    assert "position 1" in page.text_content("#queue-position")
    assert "relu_correct.py" in page.text_content("main")
    assert page.locator(".highlight").count() == 1  # the code, highlighted

    # A reload would make a new document without this mark.
    page.evaluate("window.__sameDocument = true")
    start_runner()
    from playwright.sync_api import expect

    expect(page.locator("#verdict")).to_have_text("correct", timeout=180_000)
    assert page.text_content("#status").strip() == "finished"
    # The trials and the timing table arrive too, still without a reload.
    page.wait_for_selector("#evaluation #trials", timeout=30_000)
    assert page.locator("#evaluation #timing").count() == 1
    assert page.evaluate("window.__sameDocument") is True

    page.goto(f"{live_site}/submissions/")
    row = page.locator(f"tr[data-submission='{submission.pk}']")
    assert "level1/901_Small_ReLU" in row.text_content()
    assert "correct" in row.text_content()
    page.select_option("select[name=status]", "queued")
    page.click("#submission-filters button[type=submit]")
    assert page.locator(f"tr[data-submission='{submission.pk}']").count() == 0
