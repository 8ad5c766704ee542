"""Run pages: the list, one run's progress and fast_p table, its status JSON, stop and resume."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import NoReverseMatch, include, path, reverse

from kbsite.urls import urlpatterns as site_urlpatterns
from submissions.runs import services as run_services
from submissions.runs import urls as run_urls
from submissions.runs.llm import MOCK_FILE_ENV
from submissions.runs.models import Generation, Run
from tests.runs_support import NO_CODE, RELU_CORRECT, finish_evaluation, write_answers

# Fixtures shared by the run tests: llm_model, start_generation_cluster.
pytest_plugins = ["tests.runs_support"]

# The run routes, whether or not the site's URLconf includes them yet.
urlpatterns = [
    *site_urlpatterns,
    path("runs/", include("submissions.runs.urls")),
    path("api/", include(run_urls.api_urlpatterns)),
]

RELU = "level1/901_Small_ReLU"
ADD = "level1/904_Small_Add"


@pytest.fixture
def answers(tmp_path, monkeypatch):
    def use(table: dict) -> None:
        monkeypatch.setenv(MOCK_FILE_ENV, str(write_answers(tmp_path / "answers.json", table)))

    return use


@pytest.fixture
def staff_client(db) -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_user(
        username="grace", password="a-long-passphrase-2", is_staff=True
    ))
    return client


def run_with_results(llm_model, cpu_hardware, answers) -> Run:
    """ReLU generated and evaluated correct (1.25x); Add answered without code."""
    answers({RELU: RELU_CORRECT, ADD: NO_CODE})
    run = run_services.run_create(model=llm_model, name="page run", problems=[RELU, ADD],
                                  backend="torch", hardware=cpu_hardware)
    run_services.run_start(run=run)
    for generation in run.generations.all():
        run_services.generation_step(generation_id=generation.pk, attempts=0)
    submission = run.generations.get(problem__slug=RELU).submission
    finish_evaluation(submission, verdict="correct", speedup=1.25)
    return run


@pytest.mark.urls(__name__)
@pytest.mark.django_db
def test_the_run_page_shows_progress_steps_and_the_fast_p_table(
    llm_model, cpu_hardware, sample_problems, answers
):
    run = run_with_results(llm_model, cpu_hardware, answers)
    page = Client().get(f"/runs/{run.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "page run" in html and "GPT-4o mini" in html
    assert '<span id="run-generated">2</span> of 2 steps' in html
    assert '<span id="run-evaluated">1</span> of <span id="run-submissions">1</span>' in html
    assert '<td id="run-correct">1</td>' in html
    # fast_p over the level's two problems: ReLU is correct and 1.25x, Add has no code.
    assert "<th>fast_1</th>" in html and "<th>fast_1.5</th>" in html
    row = html[html.index('<tr data-level="1">'):]
    row = row[: row.index("</tr>")]
    cells = [c.split("</td>")[0] for c in row.split("<td>")[1:]]
    assert cells[:3] == ["1", "2", "1"]
    columns = ["fast_0", "fast_0.5", "fast_0.8", "fast_1", "fast_1.5", "fast_2"]
    assert dict(zip(columns, cells[3:9], strict=True)) == {
        "fast_0": "0.500", "fast_0.5": "0.500", "fast_0.8": "0.500", "fast_1": "0.500",
        "fast_1.5": "0.000", "fast_2": "0.000",
    }
    assert NO_CODE not in html  # answers stay in the admin; the page shows the step status
    assert "no_code" in html and 'class="verdict correct"' in html
    assert "Stop the run" not in html  # only staff steer runs


@pytest.mark.urls(__name__)
@pytest.mark.django_db
def test_the_status_json_carries_what_the_page_polls(
    llm_model, cpu_hardware, sample_problems, answers
):
    run = run_with_results(llm_model, cpu_hardware, answers)
    state = Client().get(f"/runs/{run.pk}/status.json").json()
    assert (state["status"], state["generated"], state["evaluated"], state["correct"]) == (
        "finished", 2, 1, 1
    )
    assert state["cost_usd"] > 0 and state["prompt_tokens"] > 0
    [level1] = state["fast_p"]
    assert level1["fast_1"] == 0.5 and level1["fast_1.5"] == 0.0
    steps = {p["slug"]: p["steps"] for p in state["problem_steps"]}
    assert steps[ADD][0]["status"] == "no_code" and steps[ADD][0]["submission"] is None
    assert steps[RELU][0]["verdict"] == "correct" and steps[RELU][0]["speedup"] == 1.25
    assert Client().get("/runs/999999/status.json").status_code == 404


@pytest.mark.urls(__name__)
@pytest.mark.django_db
def test_staff_stop_and_resume_a_run_from_its_page(
    llm_model, cpu_hardware, sample_problems, staff_client, user
):
    run = run_services.run_create(model=llm_model, problems=[RELU], backend="torch",
                                  hardware=cpu_hardware)
    run_services.run_start(run=run)
    other = Client()
    other.force_login(user)
    refused = other.post(f"/runs/{run.pk}/stop/")
    assert refused.status_code == 302 and "/admin/login/" in refused["Location"]
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING

    assert "Stop the run" in staff_client.get(f"/runs/{run.pk}/").content.decode()
    assert staff_client.post(f"/runs/{run.pk}/stop/").status_code == 302
    run.refresh_from_db()
    assert run.status == Run.Status.STOPPED
    page = staff_client.get(f"/runs/{run.pk}/").content.decode()
    assert "Resume the run" in page
    again = staff_client.post(f"/runs/{run.pk}/stop/", follow=True)
    assert "it cannot be stopped" in again.content.decode()
    staff_client.post(f"/runs/{run.pk}/resume/")
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    assert staff_client.post(f"/runs/{run.pk}/explode/").status_code == 404


@pytest.mark.urls(__name__)
@pytest.mark.django_db
def test_the_run_list_links_every_run(llm_model, cpu_hardware, sample_problems):
    first = run_services.run_create(model=llm_model, name="first run", problems=[RELU],
                                    backend="torch", hardware=cpu_hardware)
    second = run_services.run_create(model=llm_model, name="second run", problems=[ADD],
                                     backend="torch", hardware=cpu_hardware)
    html = Client().get("/runs/").content.decode()
    for run in (first, second):
        assert f'href="/runs/{run.pk}/"' in html and run.name in html


def site_routes_runs() -> bool:
    try:
        reverse("run_detail", args=[1])
    except NoReverseMatch:
        return False
    return True


@pytest.mark.django_db(transaction=True)
def test_the_run_page_updates_live_as_steps_finish(
    llm_model, cpu_hardware, sample_problems, answers, live_site, browser
):
    """Slow: a real browser on the real server sees the run page change as steps finish."""
    if not site_routes_runs():
        pytest.skip("kbsite/urls.py does not include submissions.runs.urls yet")
    answers({RELU: RELU_CORRECT, ADD: NO_CODE})
    run = run_services.run_create(model=llm_model, problems=[RELU, ADD], backend="torch",
                                  hardware=cpu_hardware)
    run_services.run_start(run=run)
    page = browser.new_page()
    page.goto(f"{live_site}/runs/{run.pk}/")
    assert page.text_content("#run-generated") == "0"
    # Steps finish in another process than the page's server; the page follows by itself.
    for generation in run.generations.order_by("problem__number"):
        run_services.generation_step(generation_id=generation.pk, attempts=0)
    from playwright.sync_api import expect

    expect(page.locator("#run-generated")).to_have_text("2", timeout=20000)
    assert page.text_content("#run-no-code") == "1"
    assert page.text_content("#run-status") == "finished"
    assert "no_code" in page.text_content("#run-steps")
    assert Generation.objects.filter(run=run, status="done").count() == 1
