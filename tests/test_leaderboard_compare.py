"""Comparing two submissions: results side by side through the scoring rule, code as a diff."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from evaluation.services import hardware_register
from problems.models import Problem
from submissions.models import Submission
from tests.leaderboard_factory import make_problem, make_result

pytestmark = pytest.mark.django_db

URL = reverse("submissions_compare")


@pytest.fixture
def pair(db):
    gpu = hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")
    ada = get_user_model().objects.create_user(username="ada", password="a-long-passphrase-1")
    problem = make_problem(1, 1)
    Problem.objects.filter(pk=problem.pk).update(code_visibility=Problem.CodeVisibility.PUBLIC)
    fast = make_result(problem=problem, hardware=gpu, user=ada, ms=1.0)
    slow = make_result(problem=problem, hardware=gpu, user=ada, ms=4.0, flags=("extra_streams",))
    Submission.objects.filter(pk=fast.submission_id).update(source="x = 1\ny = 2\n")
    Submission.objects.filter(pk=slow.submission_id).update(source="x = 1\ny = 3\n")
    return fast.submission_id, slow.submission_id


def test_it_shows_both_results_and_the_code_as_a_diff(client, pair):
    fast, slow = pair
    page = client.get(URL, {"a": fast, "b": slow}).content.decode()
    assert ">1 ms<" in page and ">4 ms<" in page
    assert "flagged: extra_streams" in page
    assert '<span class="diff-del">-y = 2</span>' in page
    assert '<span class="diff-add">+y = 3</span>' in page


def test_code_that_is_not_public_is_never_diffed(client, pair):
    fast, slow = pair
    Problem.objects.update(code_visibility=Problem.CodeVisibility.OWNER)
    page = client.get(URL, {"a": fast, "b": slow}).content.decode()
    assert 'id="diff-hidden"' in page and "y = 3" not in page and "y = 2" not in page
    # Its owner sees it.
    client.force_login(get_user_model().objects.get(username="ada"))
    assert "+y = 3" in client.get(URL, {"a": fast, "b": slow}).content.decode()


def test_it_says_what_is_wrong_with_the_request(client, pair):
    fast, _ = pair
    assert client.get(URL).status_code == 200  # the empty form
    prefilled = client.get(URL, {"a": fast})  # from a submission's page
    assert prefilled.status_code == 200 and f'value="{fast}"' in prefilled.content.decode()
    bad = client.get(URL, {"a": fast, "b": "x"})
    assert bad.status_code == 400 and "Give two submission numbers" in bad.content.decode()
    missing = client.get(URL, {"a": fast, "b": 99999})
    assert missing.status_code == 404 and "No submission 99999." in missing.content.decode()
