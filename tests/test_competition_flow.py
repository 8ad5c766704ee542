"""A competition through the real runner: the page moves live. The rest of its flow (entries
evaluated while it runs rank, entries after the end are evaluated and shown unranked, the
standings freeze) runs in process: tests/test_competition_flow_in_process.py."""

from datetime import timedelta

import pytest
from django.utils import timezone

from competitions.models import Competition, Entry
from competitions.services import competition_submit
from submissions.models import Evaluation
from tests.conftest import kernel_source

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.fixture
def contest(cpu_hardware, relu_problem):
    now = timezone.now()
    competition = Competition.objects.create(
        slug="relu-cup",
        title="ReLU cup",
        hardware=cpu_hardware,
        daily_limit=5,
        starts_at=now + timedelta(hours=1),
        ends_at=now + timedelta(days=1),
        published=True,
    )
    competition.problems.set([relu_problem])
    return competition


def enter(competition, user, problem) -> Entry:
    return competition_submit(
        competition=competition,
        user=user,
        problem=problem,
        source=kernel_source("relu_correct.py"),
        backend="torch",
    )


def evaluations_of(entry: Entry) -> list[tuple]:
    return list(Evaluation.objects.filter(submission_id=entry.submission_id).values_list(
        "verdict", "flags", "error", "finished_at"))


@pytest.mark.browser
def test_the_standings_move_live_when_an_entry_is_evaluated(
    browser, live_site, user, relu_problem, contest, start_runner, tmp_path
):
    """Slow: a real browser sees the standings move when a real runner process evaluates an
    entry."""
    from playwright.sync_api import expect

    Competition.objects.filter(pk=contest.pk).update(starts_at=timezone.now())
    contest.refresh_from_db()
    page = browser.new_page()
    page.goto(f"{live_site}{contest.get_absolute_url()}")
    expect(page.locator("#standings-table tr.empty")).to_have_count(1)
    page.evaluate("window.__notReloaded = true")

    entry = enter(contest, user, relu_problem)
    start_runner()
    row = page.locator('#standings-table tr[data-key="standing-ada"]')
    try:
        expect(row.locator("td.points")).to_have_text("1", timeout=240_000)
    except AssertionError as exc:  # say what the entry got, not only what the page shows
        log = (tmp_path / "runner-0.log").read_text(errors="replace")[-3000:]
        raise AssertionError(f"{exc}\nthe entry's evaluations: {evaluations_of(entry)}\n"
                             f"the runner's log ends:\n{log}") from None
    expect(row.locator("td.rank")).to_have_text("1")
    assert page.evaluate("window.__notReloaded") is True
