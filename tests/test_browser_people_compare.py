"""The people's ranking and the compare page, in a real browser against the real server."""

import pytest
from django.contrib.auth import get_user_model

from evaluation.services import hardware_register
from problems.models import Problem
from submissions.models import Submission
from tests.leaderboard_factory import make_problem, make_result

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def person(name: str):
    return get_user_model().objects.create_user(username=name, password="a-long-passphrase-1")


def test_a_visitor_finds_who_is_best_overall_and_opens_their_page(browser, live_site):
    """Slow: a visitor's clicks through real pages in a real browser."""
    from playwright.sync_api import expect

    gpu = hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")
    ada, bob = person("ada"), person("bob")
    p1, p2 = make_problem(1, 1), make_problem(1, 2)
    make_result(problem=p1, hardware=gpu, user=ada, ms=1.0)
    make_result(problem=p1, hardware=gpu, user=bob, ms=0.5)
    make_result(problem=p2, hardware=gpu, user=bob, ms=0.5)

    page = browser.new_page()
    page.goto(f"{live_site}/leaderboard/people/")
    rows = page.locator("#people-table tbody tr[data-key]")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator("td.person")).to_have_text("bob")
    expect(rows.nth(0).locator("td.solved")).to_have_text("2")
    expect(rows.nth(1).locator("td.rank")).to_have_text("2")
    page.select_option("select[name=level]", "1")
    page.click("form.filters button[type=submit]")
    expect(rows).to_have_count(2)
    rows.nth(1).locator("td.person a").click()
    expect(page.locator("h1")).to_have_text("ada")


def test_two_submissions_compared_side_by_side_with_their_diff(browser, live_site):
    """Slow: the side-by-side diff is drawn in a real browser."""
    from playwright.sync_api import expect

    gpu = hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")
    ada = person("ada")
    problem = make_problem(1, 1)
    Problem.objects.filter(pk=problem.pk).update(code_visibility=Problem.CodeVisibility.PUBLIC)
    first = make_result(problem=problem, hardware=gpu, user=ada, ms=2.0)
    second = make_result(problem=problem, hardware=gpu, user=ada, ms=1.0)
    Submission.objects.filter(pk=first.submission_id).update(source="scale = 1\nrun()\n")
    Submission.objects.filter(pk=second.submission_id).update(source="scale = 2\nrun()\n")

    page = browser.new_page()
    page.goto(f"{live_site}/leaderboard/compare/")
    page.fill("#compare-a", str(first.submission_id))
    page.fill("#compare-b", str(second.submission_id))
    page.click("#compare-form button[type=submit]")
    expect(page.locator("#compare-table tr.median td")).to_have_text(["2 ms", "1 ms"])
    expect(page.locator("#compare-table tr.ranks td")).to_have_text(["yes", "yes"])
    expect(page.locator("#diff .diff-del")).to_have_text("-scale = 1")
    expect(page.locator("#diff .diff-add")).to_have_text("+scale = 2")
