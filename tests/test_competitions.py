"""Competitions: the window, the rules, the daily limit, hidden code, standings and freezing.

Results are stored as the runner stores them (tests/leaderboard_factory.py); the flow through a
real runner and a live page is in tests/test_competition_flow.py.
"""

import csv
import io
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.urls import reverse
from django.utils import timezone

from competitions.models import Competition, Entry
from competitions.services import (
    CompetitionError,
    competition_close,
    competition_standings,
    competition_submit,
)
from evaluation.services import hardware_register
from problems.models import Problem
from submissions.models import Evaluation, Submission
from tests.leaderboard_factory import make_problem, make_result, make_submission

pytestmark = pytest.mark.django_db

KERNEL = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass  # {tag}\n"


@pytest.fixture
def people(db):
    make = get_user_model().objects.create_user
    return {name: make(username=name, password="a-long-passphrase-1") for name in "abc"}


@pytest.fixture
def contest(db):
    gpu = hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")
    now = timezone.now()
    competition = Competition.objects.create(
        slug="spring",
        title="Spring sprint",
        hardware=gpu,
        backends=["triton", "cuda"],
        precisions=["fp32"],
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(days=1),
        daily_limit=3,
        published=True,
    )
    problems = [make_problem(1, n) for n in (1, 2)]
    Problem.objects.filter(pk__in=[p.pk for p in problems]).update(
        code_visibility=Problem.CodeVisibility.PUBLIC
    )
    competition.problems.set(problems)
    return competition


def enter(competition, user, problem, tag="x", backend="triton", **kw) -> Entry:
    return competition_submit(
        competition=competition,
        user=user,
        problem=problem,
        source=KERNEL.format(tag=tag),
        backend=backend,
        **kw,
    )


def result(entry: Entry, **kw) -> Evaluation:
    """The entry's evaluation, stored and its submission finished, as a runner does."""
    evaluation = make_result(
        problem=entry.problem,
        hardware=entry.competition.hardware,
        submission=entry.submission,
        **kw,
    )
    Submission.objects.filter(pk=entry.submission_id).update(
        status=Submission.Status.FINISHED, verdict=evaluation.verdict
    )
    return evaluation


def test_before_the_start_an_entry_is_refused_with_the_opening_time(contest, people):
    Competition.objects.filter(pk=contest.pk).update(starts_at=timezone.now() + timedelta(hours=2))
    contest.refresh_from_db()
    with pytest.raises(CompetitionError, match="opens at") as refused:
        enter(contest, people["a"], contest.problems.first())
    assert refused.value.code == "not_open_yet"
    assert not Submission.objects.exists()


def test_an_entry_outside_the_rules_is_refused_and_stores_nothing(contest, people):
    other = make_problem(1, 9)
    problem = contest.problems.first()
    cases = [
        ({"problem": other}, "problem_not_in_competition"),
        ({"problem": problem, "backend": "torch"}, "backend_not_allowed"),
        ({"problem": problem, "precision": "fp16"}, "precision_not_allowed"),
    ]
    for change, code in cases:
        with pytest.raises(CompetitionError) as refused:
            enter(contest, people["a"], **{"problem": problem, **change})
        assert refused.value.code == code
    with pytest.raises(CompetitionError):
        enter(contest, AnonymousUser(), problem)
    assert not Submission.objects.exists() and not Entry.objects.exists()


def test_the_daily_limit_refuses_the_entry_over_it_with_the_time_of_the_next(
    client, contest, people
):
    problem = contest.problems.first()
    for n in range(3):
        enter(contest, people["a"], problem, tag=str(n))
    with pytest.raises(CompetitionError, match="next one is possible at") as refused:
        enter(contest, people["a"], problem, tag="3")
    assert refused.value.code == "daily_limit"
    enter(contest, people["b"], problem)  # a limit per person
    # Through the page: 429, and the form says why.
    client.force_login(people["a"])
    page = client.post(
        contest.get_absolute_url(),
        {"problem": problem.pk, "backend": "triton", "precision": "fp32", "source": KERNEL},
    )
    assert page.status_code == 429 and "used today" in page.content.decode()
    assert Entry.objects.filter(user=people["a"]).count() == 3


def test_hidden_code_is_hidden_from_others_until_the_end(contest, people):
    entry = enter(contest, people["a"], contest.problems.first())
    submission = entry.submission
    submission.refresh_from_db()
    assert submission.code_visible_to(people["a"])
    assert not submission.code_visible_to(people["b"])
    assert not submission.code_visible_to(AnonymousUser())
    competition_close(competition=contest)
    submission.refresh_from_db()
    assert submission.code_visible_to(people["b"])  # the problem makes code public


def test_standings_give_rank_points_per_problem_and_count_only_verified_results(contest, people):
    p1, p2 = contest.problems.order_by("number")
    result(enter(contest, people["a"], p1, "a1"), ms=1.0)  # a: first on p1 of 3
    result(enter(contest, people["b"], p1, "b1"), ms=2.0)
    result(enter(contest, people["c"], p1, "c1"), ms=3.0)
    result(enter(contest, people["c"], p2, "c2"), ms=1.0)  # c: only one on p2
    result(enter(contest, people["b"], p2, "b2"), verdict="incorrect", ms=0.5)
    # b's would-be record waits for its re-verification: it counts for nothing yet.
    held = enter(contest, people["b"], p2, "b3")
    Submission.objects.filter(pk=held.submission_id).update(
        reverification=Submission.ReverificationState.PENDING
    )
    result(held, ms=0.5)

    rows = competition_standings(contest)
    # p1: a, b, c get 3, 2, 1 points; p2: c alone gets 1. b and c tie on 2: c solved more.
    assert [(r["rank"], r["user"], r["points"], r["solved"]) for r in rows] == [
        (1, "a", 3, 1),
        (2, "c", 2, 2),
        (3, "b", 2, 1),
    ]
    assert rows[1]["problems"][p2.slug]["rank"] == 1

    Submission.objects.filter(pk=held.submission_id).update(
        reverification=Submission.ReverificationState.PASSED
    )
    assert [(r["user"], r["points"]) for r in competition_standings(contest)][0] == ("b", 4)


def test_after_the_end_entries_are_evaluated_but_never_ranked_and_the_standings_freeze(
    client, contest, people
):
    p1 = contest.problems.order_by("number").first()
    winner = enter(contest, people["a"], p1, "a")
    result(winner, ms=2.0)
    competition_close(competition=contest)
    contest.refresh_from_db()

    late = enter(contest, people["b"], p1, "b")
    assert late.after_deadline
    result(late, ms=0.1)  # far faster, and too late
    rows = competition_standings(contest)
    contest.refresh_from_db()
    assert contest.is_frozen
    assert [(r["user"], r["points"]) for r in rows] == [("a", 1)]

    # Kept as they were: a later re-verification that flags the winner changes nothing here.
    result(winner, ms=2.0, flags=("result_caching",), purpose=Evaluation.Purpose.REVERIFY)
    assert [(r["user"], r["points"]) for r in competition_standings(contest)] == [("a", 1)]

    page = client.get(reverse("competition_person", args=[contest.slug, "b"])).content.decode()
    assert "after the deadline, not ranked" in page
    detail = client.get(contest.get_absolute_url()).content.decode()
    assert 'id="standings-frozen"' in detail
    exported = client.get(contest.get_absolute_url(), {"format": "csv"}).text
    assert [(r["rank"], r["user"], r["points"]) for r in csv.DictReader(io.StringIO(exported))] == [
        ("1", "a", "1")
    ]


def test_a_draft_is_seen_by_staff_only(client, contest, people):
    Competition.objects.filter(pk=contest.pk).update(published=False)
    assert client.get(contest.get_absolute_url()).status_code == 404
    assert "Spring sprint" not in client.get(reverse("competition_list")).content.decode()
    people["a"].is_staff = True
    people["a"].save()
    client.force_login(people["a"])
    assert client.get(contest.get_absolute_url()).status_code == 200


# ---- the competition's page: entry form, starter, standings ----------------------------------


def test_the_entry_form_offers_only_backends_allowed_and_served_with_the_sites_labels(
    client, contest, people
):
    # The competition allows Triton and CUDA; its hardware runs CUDA, Triton and PyTorch, so
    # both are offered, labelled as everywhere else, and C++ and PyTorch are not.
    Competition.objects.filter(pk=contest.pk).update(backends=["triton", "cpp"])
    contest.hardware.backends = ["cuda", "triton", "torch"]
    contest.hardware.save()
    client.force_login(people["a"])
    page = client.get(contest.get_absolute_url()).content.decode()
    form = page[page.index('id="entry-form"') :]
    assert '<option value="triton" selected>Triton</option>' in form
    assert 'value="cpp"' not in form and 'value="torch"' not in form
    assert "Backends: Triton. Precisions: fp32." in page


def test_an_entry_refused_by_the_rules_says_why_once(client, contest, people):
    problem = contest.problems.first()
    for n in range(3):
        enter(contest, people["a"], problem, tag=str(n))
    client.force_login(people["a"])
    page = client.post(
        contest.get_absolute_url(),
        {"problem": problem.pk, "backend": "triton", "precision": "fp32", "source": KERNEL},
    ).content.decode()
    assert page.count("used today") == 1


def test_the_entry_form_loads_a_working_starter_for_the_chosen_problem_and_backend(
    client, contest, people
):
    problem = contest.problems.order_by("number").last()
    client.force_login(people["a"])
    page = client.get(
        contest.get_absolute_url(), {"problem": problem.slug, "backend": "triton"}
    ).content.decode()
    assert f"# A Triton starter for {problem.slug}" in page
    assert "@triton.jit" in page and "class ModelNew(Reference):" in page
    assert f'<option value="{problem.slug}" selected>' in page
    # A backend the competition does not take loads nothing.
    page = client.get(
        contest.get_absolute_url(), {"problem": problem.slug, "backend": "cpp"}
    ).content.decode()
    assert "starter for" not in page


def test_standings_show_per_problem_cells_dates_like_the_site_and_rank_no_one_on_zero_points(
    client, contest, people
):
    p1, p2 = contest.problems.order_by("number")
    enter(contest, people["a"], p1, "a0")  # a first try, never evaluated
    result(enter(contest, people["a"], p1, "a1"), ms=1.5)
    result(enter(contest, people["b"], p2, "b1"), verdict="incorrect")
    rows = competition_standings(contest)
    assert [(r["rank"], r["user"], r["points"]) for r in rows] == [(1, "a", 1), (None, "b", 0)]
    assert rows[0]["problems"][p1.slug]["attempts"] == 2
    assert rows[1]["problems"][p2.slug] == {
        "rank": None, "points": 0, "median_ms": None, "speedup": None, "attempts": 1
    }

    page = client.get(contest.get_absolute_url()).content.decode()
    table = page[page.index('id="standings-table"') :]
    assert f"<th class=\"problem-cell\" title=\"Points · time · attempts\">{p1.slug}</th>" in table
    assert "1 pt</a> · 1.5 ms · <span class=\"attempts\">2 attempts</span>" in table
    assert "no result yet</span> · <span class=\"attempts\">1 attempt</span>" in table
    row_b = table[table.index('data-key="standing-b"') :]
    assert row_b.split("</tr>")[0].count('<td class="rank">–</td>') == 1
    # The date as the site writes it, not ISO.
    reached = rows[0]["reached_at"]
    assert reached[:16].replace("T", " ") in table and reached not in table


def test_the_standings_download_is_named_after_the_competition(client, contest):
    response = client.get(contest.get_absolute_url(), {"format": "csv"})
    assert response["Content-Disposition"] == 'attachment; filename="spring-standings.csv"'


def test_an_entrys_page_names_its_competition_with_a_link(client, contest, people):
    entry = enter(contest, people["a"], contest.problems.first())
    client.force_login(people["a"])
    page = client.get(entry.submission.get_absolute_url()).content.decode()
    assert f'<a href="{contest.get_absolute_url()}">Spring sprint</a>' in page
    plain = make_submission(problem=entry.problem, hardware=contest.hardware, user=people["a"])
    assert 'id="competition-entry"' not in client.get(plain.get_absolute_url()).content.decode()
