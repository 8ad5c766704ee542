"""The pages a visitor opens, at scale (issue 42; bench/leaderboard_bench.py times them): as many
queries for many results as for few, long lists a page at a time, and the tables read from what
is kept as results land, never every result: a run's from its samples (which follow each new
result and each result held), the people's and the models' tables and the leaderboards index
from the participants' and the boards' summaries."""

import csv
import io

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from evaluation.services import hardware_register
from leaderboard import selectors, views
from problems.models import Problem
from submissions.models import Submission
from submissions.runs import selectors as run_selectors
from submissions.runs.models import Generation, Model, Run, RunSample
from submissions.runs.samples import run_samples_rebuild
from tests.leaderboard_factory import make_problem, make_result, refresh_results

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def cold_cache():
    """Each test computes its tables itself, never reads an earlier test's."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def gpu(db):
    return hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")


@pytest.fixture
def run(gpu):
    llm = Model.objects.create(litellm_name="openai/gpt-test", display_name="GPT Test")
    return Run.objects.create(name="sweep", model=llm, hardware=gpu, samples_per_problem=3)


def add_results(run: Run, *, problems: int, people: int, samples: int) -> None:
    """`problems` more problems in the run, and on every problem of it: a result of each of
    `people` more people, and the run's samples up to `samples` (each with its step)."""
    first = Problem.objects.count() + 1
    run.problems.add(*(make_problem(1, n) for n in range(first, first + problems)))
    count = get_user_model().objects.count()
    people_added = [
        get_user_model().objects.create_user(username=f"person{count + i}") for i in range(people)
    ]
    done = set(run.submissions.values_list("problem_id", "sample_index"))
    for problem in run.problems.all():
        for person in people_added:
            make_result(problem=problem, hardware=run.hardware, user=person, ms=1.0)
        for index in range(samples):
            if (problem.pk, index) in done:
                continue
            evaluation = make_result(
                problem=problem, hardware=run.hardware, model=run.model, run=run,
                sample_index=index, verdict="incorrect" if index % 2 else "correct", ms=1.5,
            )
            Generation.objects.create(
                run=run, problem=problem, sample_index=index, status=Generation.Status.DONE,
                submission=evaluation.submission,
            )


def queries(url: str) -> int:
    cache.clear()
    with CaptureQueriesContext(connection) as captured:
        response = Client().get(url)
    assert response.status_code == 200, url
    return len(captured)


PAGES = {
    "the leaderboards index": lambda run, person: "/leaderboard/",
    "a board": lambda run, person: "/leaderboard/1/1/h200/",
    "the people table": lambda run, person: "/leaderboard/people/",
    "a model's page": lambda run, person: f"/leaderboard/models/{run.model_id}/",
    "a run's table": lambda run, person: f"/leaderboard/runs/{run.pk}/",
    "a run's page": lambda run, person: f"/runs/{run.pk}/",
    "a person's page": lambda run, person: f"/leaderboard/users/{person.username}/",
    "the problems list": lambda run, person: "/problems/",
    "a problem page": lambda run, person: "/problems/1/1/",
}


@pytest.mark.parametrize("page", PAGES)
def test_a_page_makes_as_many_queries_for_many_results_as_for_few(page, run):
    add_results(run, problems=1, people=1, samples=1)
    person = get_user_model().objects.get()
    few = queries(PAGES[page](run, person))

    add_results(run, problems=3, people=3, samples=3)
    many = queries(PAGES[page](run, person))

    assert many == few, f"{page}: {few} queries with one result a board, {many} with more"


def test_a_runs_page_lists_the_steps_of_one_page_of_its_problems(run, monkeypatch):
    monkeypatch.setattr(run_selectors, "STEP_PROBLEMS_PER_PAGE", 2)
    add_results(run, problems=3, people=0, samples=2)

    first = Client().get(f"/runs/{run.pk}/").content.decode()
    assert "level1/1_P1" in first and "level1/2_P2" in first and "level1/3_P3" not in first
    assert "Problems page 1 of 2" in first
    second = Client().get(f"/runs/{run.pk}/?page=2").content.decode()
    assert "level1/3_P3" in second and "level1/1_P1" not in second
    # The page polls for its own problems' steps; the counts are the whole run's.
    assert f'data-poll-url="/runs/{run.pk}/status.json?page=2"' in second
    state = Client().get(f"/runs/{run.pk}/status.json?page=2").json()
    assert [p["slug"] for p in state["problem_steps"]] == ["level1/3_P3"]
    assert [s["sample"] for s in state["problem_steps"][0]["steps"]] == [0, 1]
    assert (state["submissions"], state["correct"]) == (6, 3)


def test_a_runs_tables_follow_each_new_result_and_each_result_held(run):
    add_results(run, problems=2, people=0, samples=1)
    run.samples_per_problem = 1
    run.save()
    assert [r["correct"] for r in selectors.run_summary(run)] == [2]
    assert run_selectors.run_status_payload(run)["correct"] == 2

    # A later evaluation of a sample replaces its result; the tables follow at once.
    sample = run.submissions.first()
    make_result(
        problem=sample.problem, hardware=run.hardware, submission=sample, verdict="incorrect"
    )
    assert [r["correct"] for r in selectors.run_summary(run)] == [1]
    assert run_selectors.run_status_payload(run)["correct"] == 1

    # So does a result held for its re-verification, with no evaluation stored (the runner
    # holds a would-be record, then refreshes what follows from its result).
    for submission in Submission.objects.filter(run=run):
        submission.hold_for_reverification()
        refresh_results(submission.latest_evaluation)
    assert [r["correct"] for r in selectors.run_summary(run)] == [0]
    assert run_selectors.run_status_payload(run)["correct"] == 0


def test_a_runs_kept_samples_are_those_a_rebuild_counts_from_every_result(run):
    add_results(run, problems=3, people=0, samples=3)
    sample = run.submissions.order_by("pk").first()
    make_result(problem=sample.problem, hardware=run.hardware, submission=sample,
                verdict="incorrect")  # a re-evaluation
    kept = sorted(RunSample.objects.values_list(*run_selectors.SAMPLE_FIELDS))
    assert len(kept) == 9

    RunSample.objects.update(correct=False, correct_submissions=0)  # in doubt
    assert run_samples_rebuild() == 9
    assert sorted(RunSample.objects.values_list(*run_selectors.SAMPLE_FIELDS)) == kept


def test_a_runs_tables_read_a_row_a_sample_not_every_result(run):
    add_results(run, problems=3, people=1, samples=3)
    with CaptureQueriesContext(connection) as captured:
        selectors.run_summary(run)
    assert len(captured) == 3  # the samples, the samples planned, the run's problems
    assert all("evaluation_evaluation" not in q["sql"] for q in captured)


def test_the_tables_read_a_row_a_participant_or_board_not_every_entry(run):
    """The people's and the models' tables read the participants' summaries, the leaderboards
    index the boards': a few queries each, whatever the number of results."""
    add_results(run, problems=3, people=3, samples=3)
    with CaptureQueriesContext(connection) as captured:
        selectors.people_table()
        selectors.models_table()
    # Each: its levels' published problems and its summaries; the models' table, its models.
    assert len(captured) == 5
    assert all("leaderboard_bestentry" not in q["sql"] for q in captured)
    with CaptureQueriesContext(connection) as captured:
        selectors.board_index()
        selectors.busiest_problems()
        selectors.default_hardware()
    assert all("leaderboard_bestentry" not in q["sql"] for q in captured)
    assert all("evaluation_evaluation" not in q["sql"] for q in captured)


def test_the_people_table_is_shown_a_page_at_a_time_and_downloaded_whole(run, monkeypatch):
    monkeypatch.setattr(views, "PEOPLE_PER_PAGE", 2)
    add_results(run, problems=1, people=3, samples=0)

    first = Client().get("/leaderboard/people/").content.decode()
    assert first.count('<td class="rank">') == 2 and "Page 1 of 2" in first
    second = Client().get("/leaderboard/people/?hardware=h200&page=2").content.decode()
    assert second.count('<td class="rank">') == 1 and '<td class="rank">3</td>' in second
    assert "hardware=h200&amp;page=1" in second  # the filters stay on the other pages
    exported = Client().get("/leaderboard/people/?format=csv&table=people").content.decode()
    assert len(list(csv.DictReader(io.StringIO(exported)))) == 3
