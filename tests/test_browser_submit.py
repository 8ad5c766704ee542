"""A person logs in, uploads a kernel, and watches the verdict arrive without reloading."""

import pytest
from playwright.sync_api import expect

from tests.conftest import KERNELS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_an_uploaded_kernel_shows_its_verdict_without_a_reload(
    browser, live_site, user, cpu_hardware, relu_problem, start_runner
):
    """Slow: an upload in a real browser whose verdict comes from a real runner process, without a
    reload."""
    start_runner()
    page = browser.new_page()
    page.goto(f"{live_site}/accounts/login/")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "a-long-passphrase-1")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_site}/")

    page.goto(f"{live_site}/submissions/new/?problem={relu_problem.pk}")
    page.select_option("#submission-form select[name=problem]", str(relu_problem.pk))
    page.select_option("#submission-form select[name=backend]", "torch")
    page.select_option("#submission-form select[name=hardware]", "cpu")
    page.set_input_files("input[name=source_file]", str(KERNELS / "relu_correct.py"))
    page.click("#submission-form button[type=submit]")
    page.wait_for_url("**/submissions/*/")

    # Mark the document: a reload would create a new one without the mark.
    page.evaluate("window.__notReloaded = true")
    expect(page.locator("#verdict")).to_have_text("correct", timeout=90_000)
    assert page.evaluate("window.__notReloaded") is True
    assert page.text_content("#status").strip() == "finished"
    assert "ms" in page.text_content("#result-summary")
