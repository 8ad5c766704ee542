"""Finding things: the boards on the leaderboards index, filters as selects, the problems list
(pages, search, difficulty, solved counts, your status), counts that match what a visitor sees,
and the compare page's picker. In-process, with results stored as the runner stores them."""

import pytest
from django.contrib.auth import get_user_model

from evaluation.services import hardware_register
from problems import views as problem_views
from problems.difficulty import difficulty, level_medians
from problems.models import Baseline, Problem
from submissions.runs.models import Model
from tests.leaderboard_factory import make_problem, make_result, make_submission

pytestmark = pytest.mark.django_db


@pytest.fixture
def gpu(db):
    return hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")


@pytest.fixture
def people(db):
    make = get_user_model().objects.create_user
    return {name: make(username=name, password="a-long-passphrase-1") for name in ("ada", "bo")}


def test_the_leaderboards_index_lists_the_boards_by_level_with_their_ranked_kernels(
    client, gpu, people
):
    relu, fused = make_problem(1, 1), make_problem(2, 1)
    draft = make_problem(1, 2, status=Problem.Status.DRAFT)
    make_result(problem=relu, hardware=gpu, user=people["ada"], ms=1.0)
    make_result(problem=relu, hardware=gpu, user=people["bo"], verdict="incorrect")
    make_result(problem=fused, hardware=gpu, user=people["bo"], ms=2.0)
    make_result(problem=draft, hardware=gpu, user=people["bo"], ms=2.0)
    page = client.get("/leaderboard/").content.decode()
    page = page[page.index('<h2 id="boards">') : page.index("<h2>Models</h2>")]
    assert "Level 1: 1 board, 1 ranked kernel" in page
    assert "Level 2: 1 board, 1 ranked kernel" in page
    assert f'href="/leaderboard/{relu.slug}/h200/">{relu.slug}</a>' in page
    assert draft.slug not in page  # a draft's board is not there for a visitor
    row = page[page.index(f'data-key="board-{relu.pk}-h200"') :].split("</tr>")[0]
    assert "<td>2</td>" in row and '<td class="ranked">1</td>' in row  # 2 entered, 1 ranked


def test_the_level_filter_is_a_select_of_the_levels_there_are(client, gpu):
    make_problem(1, 1)
    make_problem(3, 1)
    page = client.get("/leaderboard/").content.decode()
    select = page[page.index('<select name="level"') :].split("</select>")[0]
    assert '<option value="1">level 1</option>' in select
    assert '<option value="3">level 3</option>' in select and 'value="2"' not in select
    assert client.get("/leaderboard/", {"level": "two"}).status_code == 400


def test_the_problems_list_is_paged_and_keeps_its_filters_across_pages(
    client, sample_problems, monkeypatch
):
    monkeypatch.setattr(problem_views, "PER_PAGE", 2)
    first = client.get("/problems/", {"q": "small"}).content.decode()
    assert "5 problems, 1–2 shown" in first and "Page 1 of 3" in first
    assert 'href="?q=small&amp;page=2" rel="next"' in first
    last = client.get("/problems/", {"q": "small", "page": 3}).content.decode()
    assert "level2/901_Small_Linear_GELU" in last and "level1/901_Small_ReLU" not in last
    assert 'name="q" value="small"' in last  # the search box keeps the query


def test_difficulty_grows_with_the_level_and_a_slower_than_median_reference():
    assert difficulty(level=1, baseline_ms=None, level_median_ms=None) == "easy"
    assert difficulty(level=1, baseline_ms=3.0, level_median_ms=2.0) == "medium"
    assert difficulty(level=2, baseline_ms=1.0, level_median_ms=2.0) == "medium"
    assert difficulty(level=3, baseline_ms=9.0, level_median_ms=2.0) == "expert"
    assert difficulty(level=4, baseline_ms=9.0, level_median_ms=2.0) == "expert"
    assert level_medians([(1, 1.0), (1, 3.0), (1, 2.0), (2, 5.0)]) == {1: 2.0, 2: 5.0}


def test_the_problems_list_shows_difficulty_solvers_and_your_status(client, gpu, people):
    fast, slow, untried = make_problem(1, 1), make_problem(1, 2), make_problem(1, 3)
    for problem, ms in ((fast, 1.0), (slow, 5.0), (untried, 2.0)):
        Baseline.objects.create(problem=problem, hardware=gpu, mode="eager", median_ms=ms)
    model = Model.objects.create(litellm_name="m")
    make_result(problem=fast, hardware=gpu, user=people["ada"], ms=1.0)
    make_result(problem=fast, hardware=gpu, user=people["bo"], ms=2.0)
    make_result(problem=fast, hardware=gpu, model=model, ms=0.5)  # a model is not a person
    make_result(problem=slow, hardware=gpu, user=people["ada"], verdict="incorrect")

    client.force_login(people["ada"])
    page = client.get("/problems/").content.decode()

    def row(problem) -> str:
        return page[page.index(f'href="{problem.get_absolute_url()}"') :].split("</tr>")[0]

    assert 'difficulty-easy">easy' in row(fast) and 'difficulty-medium">medium' in row(slow)
    assert '<td class="solvers">2</td>' in row(fast)  # ada and bo, not the model
    assert '<td class="solvers">0</td>' in row(slow)
    assert ">solved</span>" in row(fast) and ">tried</span>" in row(slow)
    assert ">not tried</span>" in row(untried)
    client.logout()
    assert "Your status" not in client.get("/problems/").content.decode()


def test_the_home_page_counts_the_problems_a_visitor_can_see(client, gpu):
    make_problem(1, 1)
    make_problem(1, 2, status=Problem.Status.DRAFT)
    make_problem(1, 3, status=Problem.Status.HELD)
    page = client.get("/").content.decode()
    assert ">1 problems</a>" in page


def test_published_is_offered_once_in_the_staff_status_filter(client, people):
    make_problem(1, 1)
    people["ada"].is_staff = True
    people["ada"].save()
    client.force_login(people["ada"])
    page = client.get("/problems/").content.decode()
    select = page[page.index('<select name="status"') :].split("</select>")[0]
    assert select.count("Published") == 1 and 'value="draft"' in select


def test_the_compare_page_offers_your_own_submissions_to_choose_from(client, gpu, people):
    problem = make_problem(1, 1)
    mine = [make_submission(problem=problem, hardware=gpu, user=people["ada"]) for _ in range(2)]
    theirs = make_submission(problem=problem, hardware=gpu, user=people["bo"])
    client.force_login(people["ada"])
    page = client.get("/leaderboard/compare/", {"a": mine[0].pk}).content.decode()
    assert '<datalist id="my-submissions">' in page and 'list="my-submissions"' in page
    picker = page[page.index('id="compare-mine-form"') :].split("</form>")[0]
    assert f'<option value="{mine[0].pk}" selected>' in picker
    assert f'value="{mine[1].pk}"' in picker and f'value="{theirs.pk}"' not in picker
    client.logout()
    anonymous = client.get("/leaderboard/compare/").content.decode()
    assert "Log in</a> to choose among your own" in anonymous and "<datalist" not in anonymous
