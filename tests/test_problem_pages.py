"""Public problem pages: the list by level with search, and each problem's page."""

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from leaderboard.services import board_refresh_for
from problems.models import Baseline, Problem, Validation
from problems.services import problem_upsert
from submissions.models import Evaluation, Submission

PROBLEMS = Path(__file__).resolve().parent / "problems"


def make_problem(level: int, number: int, name: str, file: str = "sound", **kw) -> Problem:
    problem = problem_upsert(
        level=level, number=number, name=name, source=(PROBLEMS / f"{file}.py").read_text(),
        description=kw.pop("description", ""),
    ).problem
    if kw.pop("publish", True):
        problem.publish()
    return problem


def slugs(response) -> list[str]:
    return [row["problem"].slug for row in response.context["rows"]]


@pytest.mark.django_db
def test_the_list_shows_published_problems_by_level_and_searches(client: Client):
    make_problem(1, 1, "Square_matmul", description="A square matrix product.")
    make_problem(1, 2, "ReLU")
    make_problem(2, 1, "Conv_ReLU_bias")
    make_problem(1, 3, "Draft_only", publish=False)
    make_problem(1, 4, "Old_softmax").retire()

    response = client.get("/problems/")
    html = response.content.decode()
    assert slugs(response) == ["level1/1_Square_matmul", "level1/2_ReLU", "level2/1_Conv_ReLU_bias"]
    assert '<h2 id="level1">Level 1' in html and '<h2 id="level2">Level 2' in html

    assert slugs(client.get("/problems/?level=2")) == ["level2/1_Conv_ReLU_bias"]
    assert slugs(client.get("/problems/?q=relu")) == ["level1/2_ReLU", "level2/1_Conv_ReLU_bias"]
    assert slugs(client.get("/problems/?q=matrix product")) == ["level1/1_Square_matmul"]
    # Retired problems keep their page but leave the list unless asked for.
    assert "level1/4_Old_softmax" in slugs(client.get("/problems/?retired=1"))
    # Drafts are curators' business.
    assert slugs(client.get("/problems/?status=draft")) == slugs(response)
    staff = get_user_model().objects.create_user("cur", password="pw-long-enough-9", is_staff=True)
    client.force_login(staff)
    assert slugs(client.get("/problems/?status=draft")) == ["level1/3_Draft_only"]


@pytest.mark.django_db
def test_a_problem_page_shows_reference_baselines_validation_and_top_results(
    client: Client, cpu_hardware, user
):
    problem = make_problem(1, 7, "Sound_linear")
    Baseline.objects.create(
        problem=problem, hardware=cpu_hardware, mode="eager", median_ms=1.5,
        torch_version="2.13.0", stats={"median_ms": 1.5},
    )
    Baseline.objects.create(
        problem=problem, hardware=cpu_hardware, mode="compile", median_ms=0.75,
        torch_version="2.13.0", stats={"median_ms": 0.75},
    )
    validation = Validation.objects.create(
        problem_version=problem.current_version, hardware=cpu_hardware
    )
    validation.claim(runner_name="r", lease_seconds=60)
    validation.finish(
        runner_name="r",
        findings=[{"code": "input_ignored", "message": "Changing input 1 alone leaves the "
                   "output unchanged within the tolerance."}],
        reference_ms=1.25, peak_memory_bytes=5 * 2**20,
    )
    submission = Submission.objects.create(
        user=user, problem=problem, problem_version=problem.current_version,
        hardware=cpu_hardware, backend="torch", source="x", source_hash="h",
        status=Submission.Status.FINISHED, verdict="correct",
    )
    evaluation = Evaluation.objects.create(
        submission=submission, hardware=cpu_hardware, problem_version=problem.current_version,
        verdict="correct", correct=True, candidate_median_ms=0.5, reference_median_ms=1.5,
        speedup=3.0, source_hash="h",
    )
    board_refresh_for(evaluation)

    response = client.get(problem.get_absolute_url())

    html = response.content.decode()
    assert response.status_code == 200
    assert '<span class="nc">Model</span>' in html  # the reference, highlighted
    section = html[html.index('id="hw-cpu"'):]
    assert "1.5 ms" in section and "0.75 ms" in section and "2.13.0" in section
    assert '<strong class="validation-status">flagged</strong>' in section
    assert "input_ignored" in section and "Changing input 1 alone" in section
    assert "5.0\xa0MB" in section and "1.25 ms" in section
    assert "ada" in section and "3.00×" in section
    # The top of the board comes through the leaderboard's tags (problems imports none of it),
    # each participant linked to their page as on the board itself.
    assert '<a href="/leaderboard/users/ada/">ada</a>' in section
    assert "Speedups against the board's reference time, 1.5 ms" in section


@pytest.mark.django_db
def test_drafts_are_hidden_from_the_public_and_hidden_code_stays_hidden(client: Client):
    draft = make_problem(1, 8, "Draft", publish=False)
    assert client.get(draft.get_absolute_url()).status_code == 404

    secret = make_problem(1, 9, "Secret_reference")
    secret.code_visibility = Problem.CodeVisibility.OWNER
    secret.save()
    html = client.get(secret.get_absolute_url()).content.decode()
    assert "The reference code is not public" in html
    assert "get_init_inputs" not in html

    staff = get_user_model().objects.create_user("cur", password="pw-long-enough-9", is_staff=True)
    client.force_login(staff)
    assert client.get(draft.get_absolute_url()).status_code == 200
    assert "get_init_inputs" in client.get(secret.get_absolute_url()).content.decode()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_visitor_searches_the_list_and_opens_a_problem(live_site, browser):
    """Slow: the search runs in a real browser (the page's JavaScript) on the real server."""
    make_problem(1, 11, "Sound_linear", description="A linear layer, then ReLU.")
    make_problem(1, 12, "Other")
    page = browser.new_page()

    page.goto(f"{live_site}/problems/")
    page.get_by_label("Search").fill("sound")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**q=sound**")
    links = page.locator("table.problems a")
    assert links.all_inner_texts() == ["level1/11_Sound_linear"]
    links.first.click()

    page.wait_for_url("**/problems/level1/11_Sound_linear/")  # the list links by slug
    assert page.locator("h1").inner_text() == "level1/11_Sound_linear"
    assert "No baselines, validations or results on any hardware yet." in page.content()
    assert page.locator(".highlight .nc", has_text="Model").count() == 1
