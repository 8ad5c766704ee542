"""A held record's page in a real browser while its re-verification passes: the ranking, the
summary and the evaluation below move together to the second evaluation, live, and the first
evaluation stays on the page, labelled (static/kbsite/live.js, submissions/evaluation.js)."""

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from kbsite.live import publish, submission_group
from submissions.models import Evaluation, Reverification, Submission
from submissions.selectors import submission_status_payload
from tests.leaderboard_factory import make_result

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_a_passing_reverification_updates_ranking_summary_and_evaluation_together(
    browser, live_site, cpu_hardware, relu_problem
):
    """Slow: a real browser sees the page's parts change together when the event arrives."""
    ada = get_user_model().objects.create_user(username="ada", password="a-long-passphrase-1")
    first = make_result(problem=relu_problem, hardware=cpu_hardware, user=ada, ms=1.0)
    submission = first.submission
    submission.mark_finished(verdict="correct")
    reverification = Reverification.objects.create(
        submission=submission, reason=Reverification.Reason.NEW_RECORD, checked_evaluation=first
    )
    submission.hold_for_reverification()

    page = browser.new_page(viewport={"width": 390, "height": 900})
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{live_site}/submissions/{submission.pk}/")
    expect(page.locator("#ranking-state")).to_have_text("pending: re-verification")
    expect(page.locator("#reverification")).to_contain_text("pending (queued)")
    expect(page.locator("#result-summary caption")).to_have_count(0)
    page.evaluate("window.__sameDocument = true")

    second = make_result(problem=relu_problem, hardware=cpu_hardware, submission=submission,
                         ms=1.1, purpose=Evaluation.Purpose.REVERIFY)
    # As the runner stores it: the comparison that decided it ranks on the second's timing.
    Evaluation.objects.filter(pk=second.pk).update(static_report={"checks": {"reverification": {
        "compared": "speedup", "roles": ["first", "second"], "outcome": "agree", "agrees": True,
        "agreeing": ["first", "second"], "ranked_on": "second", "set_aside": [],
        "first": {"value": 2.0, "low": 1.9, "high": 2.1},
        "second": {"value": 1.82, "low": 1.75, "high": 1.95}}}})
    Reverification.objects.filter(pk=reverification.pk).update(
        status=Reverification.Status.PASSED, evaluation=second
    )
    Submission.objects.filter(pk=submission.pk).update(
        reverification=Submission.ReverificationState.PASSED
    )
    submission.refresh_from_db()
    publish(submission_group(submission.pk),
            {"type": "status", **submission_status_payload(submission)})

    expect(page.locator("#ranking-state")).to_have_text("ranked", timeout=15_000)
    expect(page.locator("#result-summary caption")).to_contain_text(
        "The figures it ranks with: the second evaluation's, the slower of two that agree")
    expect(page.locator("#candidate-ms, #result-summary td").first).to_contain_text("1.1")
    heading = page.locator("#evaluation h2[data-evaluation-id]").first
    expect(heading).to_have_attribute("data-evaluation-id", str(second.pk))
    expect(heading).to_contain_text("Re-verification (second evaluation): the result")
    expect(page.locator("#evaluations tr.counts")).to_have_attribute("data-role", "second")
    expect(page.locator("#first-evaluation h2")).to_contain_text("First evaluation")
    expect(page.locator("#first-evaluation h2")).to_have_attribute(
        "data-evaluation-id", str(first.pk)
    )
    assert page.evaluate("window.__sameDocument") is True
    assert errors == []
    page.close()
