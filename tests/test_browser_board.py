"""A board open in a browser changes its rows when a runner stores a result, without a reload."""

import pytest

from submissions.services import submission_create
from tests.conftest import kernel_source
from tests.leaderboard_factory import make_result

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_a_board_row_moves_up_when_a_faster_result_lands(
    browser, live_site, user, cpu_hardware, relu_problem, start_runner, django_user_model
):
    # Two earlier results, slower than any real ReLU: bob first, ada second.
    bob = django_user_model.objects.create_user(username="bob", password="a-long-passphrase-1")
    make_result(problem=relu_problem, hardware=cpu_hardware, user=user, ms=90_000.0)
    make_result(problem=relu_problem, hardware=cpu_hardware, user=bob, ms=80_000.0)
    ada_row = f'#board-ranked tr[data-key="user:{user.pk}"]'

    page = browser.new_page()
    page.goto(f"{live_site}/leaderboard/{relu_problem.level}/{relu_problem.number}/cpu/")
    assert page.text_content(f"{ada_row} td.rank").strip() == "2"
    assert page.text_content(f"{ada_row} td.median").strip() == "9e+04 ms"
    page.wait_for_function("document.querySelectorAll('#board-ranked tr[data-key]').length === 2")
    # Mark the document: a reload would create a new one without the mark.
    page.evaluate("window.__notReloaded = true")

    submission_create(
        user=user,
        problem=relu_problem,
        source=kernel_source("relu_correct.py"),
        backend="torch",
        hardware=cpu_hardware,
    )
    start_runner()

    page.wait_for_function(
        f"(() => {{ const td = document.querySelector('{ada_row} td.rank');"
        " return td && td.textContent.trim() === '1'"
        " && td.parentElement.classList.contains('changed'); })()",
        timeout=180_000,
    )
    assert page.evaluate("window.__notReloaded") is True
    assert page.text_content(f"{ada_row} td.median").strip() != "9e+04 ms"
    ranks = page.eval_on_selector_all(
        "#board-ranked tr[data-key]", "rows => rows.map(r => r.dataset.key)"
    )
    assert ranks == [f"user:{user.pk}", f"user:{bob.pk}"]
