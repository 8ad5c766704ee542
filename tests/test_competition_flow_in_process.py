"""A competition from before its start to its frozen standings, its entries evaluated by a
runner's worker in this process (the stand-in harness in place of the sandboxed child): entries
evaluated while it runs rank, entries after the end are evaluated and shown unranked, the
standings freeze. tests/test_competition_flow.py has the live page with a real runner."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from django.utils.module_loading import import_string

from competitions.models import Competition
from competitions.services import CompetitionError, competition_close, competition_standings
from submissions.models import Submission
from tests.conftest import take_queued_tasks
from tests.test_competition_flow import contest, enter  # noqa: F401 (contest: a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def worker(harness, settings, monkeypatch):
    """Evaluate whatever is queued, as a runner's worker would, each entry correct."""
    settings.REVERIFY_NEW_RECORDS = False  # as the real runners of the tests have it
    monkeypatch.setenv("KBSITE_RUNNER_NAME", "worker:1")

    def run() -> list[str]:
        outcomes = []
        for task in take_queued_tasks("cpu"):
            harness.will_return(ms=1.0)
            outcomes.append(import_string(task["func"])(*task["args"], **task["kwargs"]))
        return outcomes

    return run


def test_a_competition_from_before_its_start_to_its_frozen_standings(
    client, user, relu_problem, contest, worker  # noqa: F811 (the fixture)
):
    bob = get_user_model().objects.create_user(username="bob", password="a-long-passphrase-1")
    with pytest.raises(CompetitionError, match="opens at"):
        enter(contest, user, relu_problem)

    Competition.objects.filter(pk=contest.pk).update(starts_at=timezone.now())
    contest.refresh_from_db()
    on_time = enter(contest, user, relu_problem)
    assert not on_time.submission.code_visible_to(AnonymousUser())  # hidden until the end
    assert worker() == ["correct"]
    assert Submission.objects.get(pk=on_time.submission_id).verdict == "correct"
    assert [(r["user"], r["points"]) for r in competition_standings(contest)] == [("ada", 1)]

    competition_close(competition=contest)
    contest.refresh_from_db()
    late = enter(contest, bob, relu_problem)
    assert late.after_deadline
    assert worker() == ["correct"]
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
