"""The competitions API: list, rules and standings, and entering a kernel with a token."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from competitions.models import Competition, Entry
from evaluation.services import hardware_register
from tests.api_support import SchemaCheckedClient, token_for
from tests.leaderboard_factory import make_problem

pytestmark = pytest.mark.django_db

KERNEL = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


@pytest.fixture
def contest(db):
    gpu = hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")
    now = timezone.now()
    competition = Competition.objects.create(
        slug="spring",
        title="Spring sprint",
        hardware=gpu,
        backends=["triton"],
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(days=1),
        daily_limit=1,
        published=True,
    )
    competition.problems.set([make_problem(1, 1)])
    Competition.objects.create(
        slug="draft", title="Not yet", hardware=gpu, starts_at=now, ends_at=now + timedelta(1)
    )
    return competition


@pytest.fixture
def ada(db):
    return get_user_model().objects.create_user(username="ada", password="a-long-passphrase-1")


def test_the_list_and_a_competition_with_its_rules_and_standings(contest):
    client = SchemaCheckedClient()
    listed = client.get("/api/v1/competitions/").json()["results"]
    assert [(c["slug"], c["phase"], c["frozen"]) for c in listed] == [("spring", "running", False)]
    detail = client.get("/api/v1/competitions/spring/").json()
    assert detail["problems"] == ["level1/1_P1"] and detail["backends"] == ["triton"]
    assert detail["scoring"] == "rank_points" and detail["standings"] == []
    assert client.get("/api/v1/competitions/draft/").status_code == 404


def test_an_agent_enters_with_a_token_and_is_held_to_the_daily_limit(contest, ada):
    client = SchemaCheckedClient().with_token(token_for(ada))
    body = {"problem": "level1/1_P1", "source": KERNEL, "backend": "triton"}
    entered = client.post("/api/v1/competitions/spring/entries/", body, format="json")
    assert entered.status_code == 201, entered.content
    assert entered.json()["after_deadline"] is False
    again = client.post("/api/v1/competitions/spring/entries/", body, format="json")
    assert again.status_code == 429 and again.json()["code"] == "daily_limit"
    wrong = client.post(
        "/api/v1/competitions/spring/entries/", {**body, "backend": "cuda"}, format="json"
    )
    assert wrong.status_code == 400 and wrong.json()["code"] == "backend_not_allowed"
    assert Entry.objects.count() == 1


def test_entering_needs_a_login(contest):
    body = {"problem": "level1/1_P1", "source": KERNEL, "backend": "triton"}
    answer = SchemaCheckedClient().post("/api/v1/competitions/spring/entries/", body, format="json")
    assert answer.status_code == 401 and answer.json()["code"] == "login_required"
    assert not Entry.objects.exists()


def test_an_entrant_without_points_is_listed_unranked_in_the_api_standings(contest, ada):
    client = SchemaCheckedClient().with_token(token_for(ada))
    body = {"problem": "level1/1_P1", "source": KERNEL, "backend": "triton"}
    entered = client.post("/api/v1/competitions/spring/entries/", body, format="json")
    assert entered.status_code == 201
    standings = client.get("/api/v1/competitions/spring/").json()["standings"]  # schema-checked
    assert [(r["user"], r["rank"], r["points"]) for r in standings] == [("ada", None, 0)]
    assert standings[0]["problems"]["level1/1_P1"]["attempts"] == 1
