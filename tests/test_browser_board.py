"""A board open in a browser changes its rows when a runner stores a result, without a reload."""

import re

import pytest

from submissions.services import submission_create
from tests.conftest import kernel_source
from tests.leaderboard_factory import make_result

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_a_board_row_moves_up_when_a_faster_result_lands(
    browser, live_site, user, cpu_hardware, relu_problem, start_runner, django_user_model
):
    # Two earlier results, slower than any real ReLU: bob first, ada second.
    """Slow: a real browser sees the board's row move through the page's websocket, without a
    reload."""
    bob = django_user_model.objects.create_user(username="bob", password="a-long-passphrase-1")
    make_result(problem=relu_problem, hardware=cpu_hardware, user=user, ms=90_000.0)
    make_result(problem=relu_problem, hardware=cpu_hardware, user=bob, ms=80_000.0)
    ada_row = f'#board-ranked tr[data-key="user:{user.pk}"]'

    page = browser.new_page()
    page.goto(f"{live_site}/leaderboard/{relu_problem.level}/{relu_problem.number}/cpu/")
    assert page.text_content(f"{ada_row} td.rank").strip() == "2"
    # The median, with its interval beside it (evaluation/stats.py: at least 2% either side).
    assert page.text_content(f"{ada_row} td.median").strip() == "9e+04 ms ± 1.8e+03"
    from playwright.sync_api import expect

    expect(page.locator("#board-ranked tr[data-key]")).to_have_count(2)
    # Mark the document: a reload would create a new one without the mark.
    page.evaluate("window.__notReloaded = true")

    submission = submission_create(
        user=user,
        problem=relu_problem,
        source=kernel_source("relu_correct.py"),
        backend="torch",
        hardware=cpu_hardware,
    )
    start_runner()

    try:
        expect(page.locator(f"{ada_row} td.rank")).to_have_text("1", timeout=180_000)
    except AssertionError:
        submission.refresh_from_db()
        evaluation = submission.evaluations.first()
        raise AssertionError(
            f"the row did not move up; the submission is {submission.status} "
            f"{submission.verdict!r}, flags {evaluation and evaluation.flags}, "
            f"median {evaluation and evaluation.candidate_median_ms} ms, "
            f"error {evaluation and evaluation.error!r}"
        ) from None
    expect(page.locator(ada_row)).to_have_class(re.compile(r"\bchanged\b"))
    assert page.evaluate("window.__notReloaded") is True
    assert not page.text_content(f"{ada_row} td.median").strip().startswith("9e+04 ms")
    ranks = page.eval_on_selector_all(
        "#board-ranked tr[data-key]", "rows => rows.map(r => r.dataset.key)"
    )
    assert ranks == [f"user:{user.pk}", f"user:{bob.pk}"]
