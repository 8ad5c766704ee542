"""Drafts and held problems are invisible and closed to submissions for everyone but staff, by one
rule (Problem.objects.visible_to / open_for_submissions): the problem pages and API, boards, the
submit form, the submissions API (single and batch), competitions, and submission_create itself.
A private problem's reference is shown to staff only, on the page, in the API and as a starter."""

import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from competitions.models import Competition
from evaluation.services import hardware_register
from problems.models import Problem
from submissions.errors import SubmissionError
from submissions.models import Submission
from submissions.services import submission_create
from tests.api_support import token_for
from tests.conftest import kernel_source
from tests.leaderboard_factory import make_problem

pytestmark = pytest.mark.django_db

KERNEL = kernel_source("relu_correct.py")
HIDDEN = (Problem.Status.DRAFT, Problem.Status.HELD, Problem.Status.VALIDATED)


@pytest.fixture
def people(db):
    make = get_user_model().objects.create_user  # no passwords: hashing one takes a while
    return {"anonymous": None, "stranger": make(username="eve"),
            "staff": make(username="root", is_staff=True)}


@pytest.fixture
def hw(db):
    return hardware_register(slug="cpu", name="CPU", kind="cpu", backends=["torch"])


def page_client(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def api_client(user) -> Client:
    if user is None:
        return Client()
    return Client(HTTP_AUTHORIZATION=f"Token {token_for(user)}")


@pytest.mark.parametrize("status", HIDDEN)
@pytest.mark.parametrize("who", ["anonymous", "stranger", "staff"])
def test_a_draft_or_held_problem_is_there_for_staff_only(status, who, people, hw):
    problem = make_problem(1, 7, status=status)
    shown = who == "staff"
    where = f"{problem.level}/{problem.number}"
    api = api_client(people[who])
    detail = api.get(f"/api/v1/problems/{where}/")
    assert detail.status_code == (200 if shown else 404)
    if not shown:
        assert problem.source not in detail.content.decode()
    listed = api.get("/api/v1/problems/", {"status": status}).json()
    assert [p["slug"] for p in listed["results"]] == ([problem.slug] if shown else [])
    pages = page_client(people[who])
    assert pages.get(f"/problems/{where}/").status_code == (200 if shown else 404)
    assert (problem.slug in pages.get("/problems/", {"status": status}).content.decode()) == shown
    board = f"{where}/{hw.slug}/"
    assert pages.get(f"/leaderboard/{board}").status_code == (200 if shown else 404)
    assert api.get(f"/api/v1/leaderboard/boards/{board}").status_code == (200 if shown else 404)


@pytest.mark.parametrize("status", HIDDEN)
def test_a_draft_or_held_problem_takes_no_submission_but_from_staff(status, people, hw):
    problem = make_problem(1, 7, status=status)
    stranger = api_client(people["stranger"])
    item = {"problem": problem.slug, "backend": "torch", "source": KERNEL}
    refused = stranger.post("/api/v1/submissions/", item, content_type="application/json")
    assert refused.status_code == 400 and refused.json()["code"] == "unknown_problem"
    assert problem.slug not in json.dumps(refused.json().get("allowed") or [])
    by_number = {**item, "problem": "", "level": problem.level, "number": problem.number}
    assert stranger.post("/api/v1/submissions/", by_number,
                         content_type="application/json").status_code == 400
    batch = stranger.post("/api/v1/submissions/batch/", {"submissions": [item]},
                          content_type="application/json")
    assert batch.status_code == 400
    with pytest.raises(SubmissionError) as refused_here:
        submission_create(user=people["stranger"], problem=problem, source=KERNEL,
                          backend="torch", hardware=hw)
    assert refused_here.value.code == "unknown_problem"
    form = page_client(people["stranger"]).post(
        "/submissions/new/", {"problem": problem.slug, "backend": "torch", "hardware": hw.slug,
                              "precision": "fp32", "source": KERNEL})
    assert form.status_code == 400
    assert not Submission.objects.exists()
    # Staff try kernels on problems under curation.
    accepted = api_client(people["staff"]).post("/api/v1/submissions/", item,
                                                content_type="application/json")
    assert accepted.status_code == 202 and Submission.objects.count() == 1


def test_a_published_problem_takes_submissions_and_a_retired_one_says_so(people, hw):
    stranger = api_client(people["stranger"])
    published = make_problem(1, 1)
    retired = make_problem(1, 2, status=Problem.Status.RETIRED)
    item = {"backend": "torch", "source": KERNEL}
    assert stranger.post("/api/v1/submissions/", {**item, "problem": published.slug},
                         content_type="application/json").status_code == 202
    closed = stranger.post("/api/v1/submissions/", {**item, "problem": retired.slug},
                           content_type="application/json")
    assert closed.status_code == 409 and closed.json()["code"] == "retired"


def test_the_submit_form_offers_and_starts_only_what_the_user_may_submit_to(people, hw):
    draft = make_problem(1, 7, status=Problem.Status.DRAFT)
    published = make_problem(1, 1)
    page = page_client(people["stranger"]).get("/submissions/new/", {"problem": draft.slug})
    body = page.content.decode()
    assert published.slug in body and draft.slug not in body
    staff = page_client(people["staff"]).get("/submissions/new/", {"problem": draft.slug})
    assert draft.slug in staff.content.decode()


def test_a_competition_shows_and_takes_no_draft_of_its_problems(people, hw):
    published = make_problem(1, 1)
    draft = make_problem(1, 7, status=Problem.Status.DRAFT)
    now = timezone.now()
    competition = Competition.objects.create(
        slug="spring", title="Spring", hardware=hw, starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(days=1), published=True,
    )
    competition.problems.set([published, draft])
    stranger = api_client(people["stranger"])
    listed = stranger.get("/api/v1/competitions/spring/").json()["problems"]
    assert listed == [published.slug]
    assert api_client(people["staff"]).get("/api/v1/competitions/spring/").json()["problems"] == [
        published.slug, draft.slug
    ]
    entry = stranger.post("/api/v1/competitions/spring/entries/",
                          {"problem": draft.slug, "backend": "torch", "source": KERNEL},
                          content_type="application/json")
    assert entry.status_code == 400 and entry.json()["code"] == "problem_not_in_competition"
    page = page_client(people["stranger"]).get("/competitions/spring/").content.decode()
    assert published.slug in page and draft.slug not in page
    assert not Submission.objects.exists()


@pytest.mark.parametrize("who", ["anonymous", "stranger", "staff"])
def test_a_private_problems_reference_is_shown_to_staff_only(who, people, hw):
    problem = make_problem(1, 1)
    Problem.objects.filter(pk=problem.pk).update(code_visibility=Problem.CodeVisibility.OWNER)
    shown = who == "staff"
    body = api_client(people[who]).get(f"/api/v1/problems/{problem.level}/{problem.number}/")
    assert (body.json()["source"] == problem.source) == shown
    assert shown or body.json()["source"] is None
    page = page_client(people[who]).get(f"/problems/{problem.level}/{problem.number}/")
    assert ("The reference code is not public" not in page.content.decode()) == shown
    if who != "anonymous":
        start = page_client(people[who]).get("/submissions/new/", {"problem": problem.slug})
        assert ("pass  # 1" in start.content.decode()) == shown


def test_a_drafts_live_board_is_not_there_for_others(people, hw):
    from django.contrib.auth.models import AnonymousUser

    from leaderboard.consumers import BoardConsumer

    draft = make_problem(1, 7, status=Problem.Status.DRAFT)
    for user in (AnonymousUser(), people["stranger"]):
        assert BoardConsumer._snapshot(draft.pk, hw.slug, user) is None
    assert BoardConsumer._snapshot(draft.pk, hw.slug, people["staff"]) is not None


def test_a_drafts_results_are_not_published_to_every_visitor(
    people, hw, django_capture_on_commit_callbacks
):
    from kbsite.models import LiveEvent
    from tests.leaderboard_factory import make_result

    draft = make_problem(1, 7, status=Problem.Status.DRAFT)
    published = make_problem(1, 1)
    with django_capture_on_commit_callbacks(execute=True):
        make_result(problem=draft, hardware=hw, user=people["staff"], ms=1.0)
    assert not LiveEvent.objects.filter(group="leaderboard").exists()
    with django_capture_on_commit_callbacks(execute=True):
        make_result(problem=published, hardware=hw, user=people["stranger"], ms=1.0)
    assert LiveEvent.objects.filter(group="leaderboard").count() == 1


def test_the_public_leaderboard_pages_leave_drafts_out(people, hw):
    from leaderboard import selectors
    from tests.leaderboard_factory import make_result

    draft = make_problem(1, 7, status=Problem.Status.DRAFT)
    published = make_problem(1, 1)
    for problem in (draft, published):
        make_result(problem=problem, hardware=hw, user=people["staff"], ms=1.0)
    assert [r["problem"] for r in selectors.recent_records()] == [published.slug]
    assert [r["problem"] for r in selectors.busiest_problems()] == [published.slug]
    mine = selectors.participant_entries(user=people["staff"])
    assert [r["problem"] for r in mine] == [published.slug]
    assert draft.slug not in page_client(None).get("/leaderboard/users/root/").content.decode()


def test_the_home_pages_recent_results_leave_drafts_out(people, hw):
    from tests.leaderboard_factory import make_result

    draft = make_problem(1, 7, status=Problem.Status.DRAFT)
    published = make_problem(1, 1)
    for problem in (draft, published):
        make_result(problem=problem, hardware=hw, user=people["staff"], ms=1.0)
    rows = page_client(None).get("/", {"fragment": "recent"}).content.decode()
    assert published.slug in rows and draft.slug not in rows
