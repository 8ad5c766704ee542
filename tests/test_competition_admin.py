"""Admins create competitions, open and close them now, and freeze their standings."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from competitions.models import Competition
from evaluation.services import hardware_register
from problems.models import Problem
from tests.leaderboard_factory import make_problem

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    admin = get_user_model().objects.create_superuser(
        username="root", password="a-long-passphrase-1", email="root@example.org"
    )
    client.force_login(admin)
    return client


def act(client, action: str, competition: Competition):
    return client.post(
        reverse("admin:competitions_competition_changelist"),
        {"action": action, "_selected_action": [competition.pk]},
        follow=True,
    )


def test_an_admin_creates_opens_closes_and_freezes_a_competition(admin_client):
    gpu = hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")
    problem = make_problem(1, 1)
    later = timezone.now() + timedelta(days=1)
    created = admin_client.post(
        reverse("admin:competitions_competition_add"),
        {
            "slug": "winter",
            "title": "Winter",
            "description": "",
            "problems": [problem.pk],
            "hardware": gpu.pk,
            "backends": ["triton", "cuda"],
            "precisions": ["fp32"],
            "starts_at_0": f"{later:%Y-%m-%d}",
            "starts_at_1": "00:00:00",
            "ends_at_0": f"{later + timedelta(days=7):%Y-%m-%d}",
            "ends_at_1": "00:00:00",
            "daily_limit": 10,
            "code_hidden": "on",
            "created_at_0": f"{later:%Y-%m-%d}",
            "created_at_1": "00:00:00",
        },
    )
    assert created.status_code == 302, created.content.decode()[:2000]
    competition = Competition.objects.get(slug="winter")
    assert competition.phase() == Competition.Phase.UPCOMING and not competition.published
    assert competition.backends == ["triton", "cuda"] and competition.precisions == ["fp32"]

    act(admin_client, "open_now", competition)
    competition.refresh_from_db()
    assert competition.published and competition.phase() == Competition.Phase.RUNNING

    refused = act(admin_client, "freeze", competition).content.decode()
    assert "only an ended competition can be frozen" in refused

    act(admin_client, "close_now", competition)
    competition.refresh_from_db()
    assert competition.phase() == Competition.Phase.ENDED

    act(admin_client, "freeze", competition)
    competition.refresh_from_db()
    assert competition.is_frozen and competition.final_standings == []


def test_the_admin_form_ticks_backends_and_precisions_and_lists_only_published_problems(
    admin_client,
):
    hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")
    published = make_problem(1, 1)
    draft = make_problem(1, 2, status=Problem.Status.DRAFT)
    page = admin_client.get(reverse("admin:competitions_competition_add")).content.decode()
    # Checkboxes, not a JSON box.
    assert 'type="checkbox" name="backends" value="cuda"' in page
    assert 'type="checkbox" name="precisions" value="bf16"' in page
    assert '<textarea name="backends"' not in page and '<textarea name="precisions"' not in page
    assert f'value="{published.pk}"' in page and f'value="{draft.pk}"' not in page


def test_the_entries_are_called_entries_in_the_admin(admin_client):
    page = admin_client.get(reverse("admin:index")).content.decode()
    assert "Entries" in page and "Entrys" not in page
