"""A competition through the real runner: entries evaluated while it runs rank, entries after
the end are evaluated and shown unranked, the standings freeze, and the page moves live."""

import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from competitions.models import Competition, Entry
from competitions.services import (
    CompetitionError,
    competition_close,
    competition_standings,
    competition_submit,
)
from submissions.models import Submission
from tests.conftest import kernel_source, wait_for

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


def finished(entry: Entry) -> bool:
    return Submission.objects.get(pk=entry.submission_id).status == Submission.Status.FINISHED


def test_a_competition_from_before_its_start_to_its_frozen_standings(
    client, user, relu_problem, contest, start_runner
):
    """Slow: an entry evaluated by a real runner process changes the standings, which then freeze
    at the end."""
    bob = get_user_model().objects.create_user(username="bob", password="a-long-passphrase-1")
    with pytest.raises(CompetitionError, match="opens at"):
        enter(contest, user, relu_problem)

    Competition.objects.filter(pk=contest.pk).update(starts_at=timezone.now())
    contest.refresh_from_db()
    on_time = enter(contest, user, relu_problem)
    assert not on_time.submission.code_visible_to(AnonymousUser())  # hidden until the end
    start_runner()
    wait_for(lambda: finished(on_time), timeout=240)
    assert Submission.objects.get(pk=on_time.submission_id).verdict == "correct"
    assert [(r["user"], r["points"]) for r in competition_standings(contest)] == [("ada", 1)]

    competition_close(competition=contest)
    contest.refresh_from_db()
    late = enter(contest, bob, relu_problem)
    assert late.after_deadline
    wait_for(lambda: finished(late), timeout=240)
    assert Submission.objects.get(pk=late.submission_id).verdict == "correct"

    standings = competition_standings(contest)
    contest.refresh_from_db()
    assert contest.is_frozen and [(r["user"], r["points"]) for r in standings] == [("ada", 1)]
    bobs = client.get(f"/competitions/{contest.slug}/people/bob/").content.decode()
    assert "after the deadline, not ranked" in bobs
    exported = json.loads(client.get(contest.get_absolute_url(), {"format": "json"}).content)
    assert [(r["rank"], r["user"], r["points"]) for r in exported["rows"]] == [(1, "ada", 1)]
    shown = Submission.objects.get(pk=on_time.submission_id)
    assert shown.code_visible_to(AnonymousUser())  # after the end: the sample problem is public


@pytest.mark.browser
def test_the_standings_move_live_when_an_entry_is_evaluated(
    browser, live_site, user, relu_problem, contest, start_runner
):
    """Slow: a real browser sees the standings move when a real runner process evaluates an entry.
    """
    from playwright.sync_api import expect

    Competition.objects.filter(pk=contest.pk).update(starts_at=timezone.now())
    contest.refresh_from_db()
    page = browser.new_page()
    page.goto(f"{live_site}{contest.get_absolute_url()}")
    expect(page.locator("#standings-table tr.empty")).to_have_count(1)
    page.evaluate("window.__notReloaded = true")

    enter(contest, user, relu_problem)
    start_runner()
    row = page.locator('#standings-table tr[data-key="standing-ada"]')
    expect(row.locator("td.points")).to_have_text("1", timeout=240_000)
    expect(row.locator("td.rank")).to_have_text("1")
    assert page.evaluate("window.__notReloaded") is True
