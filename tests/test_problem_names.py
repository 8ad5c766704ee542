"""One name for a problem everywhere (issue 65): every page and API URL that takes a problem
answers for its slug (level1/904_Small_Add), for its level and number in the slug's route
(level1/904) and in the older route (1/904); a path after the problem (starter/) is not taken
for part of its name; links name it by slug; and the submit page's two problem selectors name
the same problem, wired for the script that keeps them in step (static/kbsite/starter-picker.js).

The rule is problems.selectors.problem_by_name; these ask the URLs, as people and `kb` do."""

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import resolve, reverse
from django.utils import timezone

from competitions.models import Competition
from evaluation.services import hardware_register
from problems.models import Problem
from problems.selectors import problem_by_name
from submissions.services import problem_for_submission
from tests.api_support import SchemaCheckedClient, openapi_schema
from tests.leaderboard_factory import make_problem, make_result

pytestmark = pytest.mark.django_db

ADD = "level1/904_Small_Add"
RELU = "level1/901_Small_ReLU"
# Each problem's three names in a URL: its slug, its level and number in the slug's route, and
# its level and number in the older route.
ADD_NAMES = ("level1/904_Small_Add", "level1/904", "1/904")
RELU_NAMES = ("level1/901_Small_ReLU", "level1/901", "1/901")


@pytest.fixture
def api():
    return SchemaCheckedClient()


@pytest.fixture
def staff(db):
    return get_user_model().objects.create_user(
        username="curator", password="a-long-passphrase-1", is_staff=True
    )


@pytest.fixture
def ranked(sample_problems, cpu_hardware, user):
    """A ranked result of ada's on ReLU's cpu board, so that the boards list it."""
    make_result(problem=sample_problems[RELU], hardware=cpu_hardware, user=user, ms=1.0)
    return sample_problems[RELU]


@pytest.fixture
def sprint(db) -> Competition:
    """A running competition of two problems, level1/1_P1 and level1/2_P2, in Triton."""
    now = timezone.now()
    competition = Competition.objects.create(
        slug="sprint", title="Sprint", backends=["triton"], precisions=["fp32"],
        hardware=hardware_register(slug="h200", name="NVIDIA H200", kind="gpu"),
        starts_at=now - timedelta(hours=1), ends_at=now + timedelta(days=1), published=True,
    )
    competition.problems.set([make_problem(1, 1), make_problem(1, 2)])
    return competition


# ---- the rule ---------------------------------------------------------------------------------


def test_the_resolver_finds_a_problem_by_each_of_its_names(sample_problems):
    add = sample_problems[ADD]
    assert problem_by_name(name=ADD) == add
    assert problem_by_name(name="1/904") == add
    assert problem_by_name(name="level1/904") == add
    assert problem_by_name(level=1, name="904_Small_Add") == add
    assert problem_by_name(level=1, name="904") == add
    assert problem_by_name(level=1, number=904) == add
    for nothing in ("", "904_Small_Add", "level1/905", "level2/904_Small_Add", "1/904/x"):
        assert problem_by_name(name=nothing) is None, nothing
    assert problem_by_name(level=1, name="Small_Add") is None
    assert problem_by_name(level=2, number=904) is None


def test_a_slug_is_tried_before_a_level_and_number(sample_problems):
    """A name that is both a slug and a level and number is the slug's problem."""
    odd = Problem.objects.create(slug="level1/902", level=1, number=77, name="odd")
    assert problem_by_name(level=1, name="902") == odd
    assert problem_by_name(name="level1/902") == odd
    assert problem_by_name(name="1/902") == sample_problems["level1/902_Small_Matmul"]


def test_the_resolver_finds_only_among_the_problems_it_is_given(sample_problems):
    Problem.objects.filter(slug=ADD).update(status=Problem.Status.DRAFT)
    visible = Problem.objects.visible_to(None)
    assert problem_by_name(visible, name=ADD) is None
    assert problem_by_name(visible, level=1, number=904) is None
    assert problem_by_name(name=ADD) is not None


# ---- every URL that takes a problem -------------------------------------------------------------


@pytest.mark.parametrize("name", ADD_NAMES)
def test_the_problem_page_answers_to_each_name(client, sample_problems, name):
    response = client.get(f"/problems/{name}/")
    assert response.status_code == 200
    assert response.context["problem"].slug == ADD


@pytest.mark.parametrize("name", ADD_NAMES)
def test_the_problem_api_answers_to_each_name(api, sample_problems, name):
    response = api.get(f"/api/v1/problems/{name}/")
    assert response.status_code == 200, response.content
    assert response.json()["slug"] == ADD


@pytest.mark.parametrize("name", ADD_NAMES)
def test_the_starter_api_answers_to_each_name(api, sample_problems, name):
    response = api.get(f"/api/v1/problems/{name}/starter/", {"backend": "torch"})
    assert response.status_code == 200, response.content
    assert response.json()["problem"] == ADD
    assert response.json()["filename"] == "level1_904_Small_Add_torch.py"


@pytest.mark.parametrize("name", RELU_NAMES)
def test_the_board_pages_answer_to_each_name(client, ranked, name):
    main = client.get(f"/leaderboard/{name}/cpu/")
    assert main.status_code == 200
    assert main.context["problem"] == ranked
    other = client.get(f"/leaderboard/{name}/cpu/fp16/")
    assert other.status_code == 200
    assert (other.context["problem"], other.context["precision"]) == (ranked, "fp16")


@pytest.mark.parametrize("name", RELU_NAMES)
def test_the_board_api_answers_to_each_name(api, ranked, name):
    response = api.get(f"/api/v1/leaderboard/boards/{name}/cpu/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["problem"]["slug"] == RELU
    assert [row["participant"] for row in body["rows"]] == ["ada"]


@pytest.mark.parametrize("name", [*ADD_NAMES, "pk"])
def test_the_submit_page_starts_from_the_problem_a_link_names(
    client, user, sample_problems, cpu_hardware, name
):
    """?problem= takes a slug, a level and number, and a pk (links made before slugs)."""
    add = sample_problems[ADD]
    value = str(add.pk) if name == "pk" else name
    client.force_login(user)
    page = client.get("/submissions/new/", {"problem": value}).content.decode()
    assert f'<option value="{add.pk}" selected>' in page
    assert f'<option value="{ADD}" selected>' in page  # the starter picker agrees


@pytest.mark.parametrize("name", ["level1/2_P2", "1/2"])
def test_the_competition_entry_form_starts_from_the_problem_a_link_names(
    client, user, sprint, name
):
    client.force_login(user)
    page = client.get(sprint.get_absolute_url(), {"problem": name, "backend": "triton"})
    assert "# A Triton starter for level1/2_P2" in page.content.decode()


def test_a_submission_names_its_problem_by_level_and_number_in_one_string_too(
    user, sample_problems, cpu_hardware
):
    assert problem_for_submission(user=user, slug="1/904") == sample_problems[ADD]
    assert problem_for_submission(user=user, slug=ADD) == sample_problems[ADD]


# ---- what is not there --------------------------------------------------------------------------


def test_a_name_of_no_problem_is_a_404_that_says_the_name_asked_for(api, client, sample_problems):
    for name in ("level1/999_Nope", "level1/999", "1/999"):
        assert client.get(f"/problems/{name}/").status_code == 404
        response = api.get(f"/api/v1/problems/{name}/")
        assert response.status_code == 404
        assert response.json()["detail"] == f"There is no problem {name}."
        starter = api.get(f"/api/v1/problems/{name}/starter/", {"backend": "torch"})
        assert starter.json()["detail"] == f"There is no problem {name}."
    assert client.get("/problems/level1/904_Small_Add/extra/").status_code == 404


def test_a_draft_is_found_by_any_of_its_names_by_staff_only(api, client, sample_problems, staff):
    Problem.objects.filter(slug=ADD).update(status=Problem.Status.DRAFT)
    for name in ADD_NAMES:
        assert client.get(f"/problems/{name}/").status_code == 404
        assert api.get(f"/api/v1/problems/{name}/").status_code == 404
    client.force_login(staff)
    api.force_authenticate(staff)
    for name in ADD_NAMES:
        assert client.get(f"/problems/{name}/").status_code == 200
        assert api.get(f"/api/v1/problems/{name}/").json()["slug"] == ADD


def test_starter_after_a_problem_is_its_own_route_not_part_of_the_name(sample_problems):
    """The slug is two segments, level<int>/<str>, not a greedy path: starter/ after 1/904/ is
    the starter of 1/904, not a problem named "1/904"."""
    assert resolve(f"/api/v1/problems/{ADD}/starter/").url_name == "api_problem_starter"
    assert resolve("/api/v1/problems/level1/904/starter/").url_name == "api_problem_starter"
    assert resolve("/api/v1/problems/1/904/starter/").url_name == "api_problem_starter_number"
    assert resolve(f"/api/v1/problems/{ADD}/").url_name == "api_problem_detail"
    assert resolve("/api/v1/problems/1/904/").url_name == "api_problem_detail_number"
    response = Client().get("/api/v1/problems/1/904/starter/", {"backend": "torch"})
    assert response.status_code == 200
    assert response.json()["problem"] == ADD


def test_the_schema_lists_each_problem_route_with_its_own_operation():
    paths = openapi_schema()["paths"]
    operations = {
        "/api/v1/problems/level{level}/{name}/": "problems_retrieve",
        "/api/v1/problems/{level}/{number}/": "problems_retrieve_by_number",
        "/api/v1/problems/level{level}/{name}/starter/": "problems_starter",
        "/api/v1/problems/{level}/{number}/starter/": "problems_starter_by_number",
        "/api/v1/leaderboard/boards/level{level}/{name}/{hardware}/": "leaderboard_board",
        "/api/v1/leaderboard/boards/{level}/{number}/{hardware}/": "leaderboard_board_by_number",
    }
    for path, operation_id in operations.items():
        assert paths[path]["get"]["operationId"] == operation_id, path
    assert not [path for path in paths if "problem_slug" in path]  # no greedy path is left
    name = next(
        p for p in paths["/api/v1/problems/level{level}/{name}/"]["get"]["parameters"]
        if p["name"] == "name"
    )
    assert "19_ReLU" in name["description"]


# ---- links use the slug -------------------------------------------------------------------------


def test_a_problem_links_to_itself_by_slug(sample_problems):
    assert sample_problems[ADD].get_absolute_url() == "/problems/level1/904_Small_Add/"


def test_a_slug_of_another_form_links_by_level_and_number_in_the_same_route(db):
    """A slug edited by hand in the admin is not a route's two parts: its links use
    level<level>/<number>, which finds it all the same."""
    odd = Problem.objects.create(slug="custom relu", level=3, number=7, name="odd")
    assert odd.get_absolute_url() == "/problems/level3/7/"
    assert Client().get(odd.get_absolute_url()).status_code == 404  # a draft, for staff only
    Problem.objects.filter(pk=odd.pk).update(status=Problem.Status.PUBLISHED)
    assert Client().get(odd.get_absolute_url()).context["problem"] == odd


def test_the_problem_page_links_by_slug(client, user, ranked):
    client.force_login(user)
    page = client.get("/problems/1/901/").content.decode()  # asked for by the older form
    assert f'href="/submissions/new/?problem={RELU}"' in page
    assert f'href="/leaderboard/{RELU}/cpu/"' in page
    assert "?problem=1\"" not in page and f"?problem={ranked.pk}\"" not in page
    hrefs = re.findall(r'href="(/(?:problems|leaderboard)/[^"?#]*)"', page)
    by_number = [h for h in hrefs if re.match(r"^/(problems|leaderboard)/\d+/\d+/", h)]
    assert by_number == []


def test_the_boards_link_by_slug(client, ranked, user):
    board = client.get("/leaderboard/1/901/cpu/").content.decode()
    assert f'<h1><a href="/problems/{RELU}/">{RELU}</a>' in board
    home = client.get("/leaderboard/", {"hardware": "cpu"}).content.decode()
    assert f'href="/leaderboard/{RELU}/cpu/">{RELU}</a>' in home
    assert f'href="/problems/{RELU}/">{RELU}</a>' in home  # the busiest problems
    person = client.get(f"/leaderboard/users/{user.username}/").content.decode()
    assert f'href="/leaderboard/{RELU}/cpu/">{RELU}</a>' in person
    for page in (board, home, person):
        hrefs = re.findall(r'href="(/(?:problems|leaderboard)/[^"?#]*)"', page)
        assert [h for h in hrefs if re.match(r"^/(problems|leaderboard)/\d+/\d+/", h)] == []


def test_the_api_lists_problems_with_their_url_by_slug(api, sample_problems):
    first = api.get("/api/v1/problems/").json()["results"][0]
    assert first["url"].endswith(f"/api/v1/problems/{first['slug']}/")
    assert api.get(first["url"]).json()["slug"] == first["slug"]


# ---- the submit page's two problem selectors ----------------------------------------------------


def picker_of(page: str) -> str:
    return page[page.index('id="starter-form"') - 40 : page.index("</form>", page.index(
        'id="starter-form"'))]


def starter_problems(page: str) -> list[dict]:
    found = re.search(
        r'<script id="starter-problems" type="application/json">(.*?)</script>', page, re.S
    )
    assert found, "the picker's problems are not on the page"
    return json.loads(found.group(1))


def test_the_submit_page_pairs_the_pickers_problems_with_the_forms(
    client, user, sample_problems, cpu_hardware
):
    """The picker names problems by slug and the form by pk: the page says which is which, and
    where each one's starter is, for the script that keeps the two in step."""
    client.force_login(user)
    page = client.get("/submissions/new/", {"problem": RELU}).content.decode()
    picker = picker_of(page)
    assert 'data-form="submission-form"' in picker
    assert f'data-starter-for="{RELU}"' in picker  # the code below is that starter
    assert 'id="submission-form"' in page and 'id="starter-note"' in page
    assert '<script src="/static/kbsite/starter-picker.js" defer></script>' in page
    choices = starter_problems(page)
    form_options = re.findall(r'<option value="(\d+)"', page[page.index('id="id_problem"'):])
    assert sorted(c["pk"] for c in choices) == sorted(form_options)
    assert [c["slug"] for c in choices] == re.findall(r'<option value="(level[^"]+)"', picker)
    for choice in choices:
        problem = Problem.objects.get(pk=choice["pk"])
        assert choice["slug"] == problem.slug
        assert choice["starter"] == f"/api/v1/problems/{problem.slug}/starter/"
        starter = client.get(choice["starter"], {"backend": "torch"})
        assert starter.status_code == 200
        assert starter.json()["problem"] == problem.slug


def test_code_sent_back_with_an_error_is_not_taken_for_a_starter(
    client, user, sample_problems, cpu_hardware
):
    """After a refused post the code is the user's own: no data-starter-for, so the script never
    replaces it with another problem's starter."""
    client.force_login(user)
    page = client.get("/submissions/new/").content.decode()
    assert "data-starter-for" not in picker_of(page)  # nothing loaded: the code is empty
    response = client.post(
        "/submissions/new/",
        {"problem": sample_problems[RELU].pk, "backend": "torch", "hardware": "cpu",
         "precision": "fp32", "source": "", "purpose": "ranked"},
    )
    assert response.status_code == 400
    assert "data-starter-for" not in picker_of(response.content.decode())


def test_the_script_keeps_the_selectors_in_step_both_ways():
    """The script's wiring, read as text (the browser test drives it): it listens on both
    selects, sets the other, and fetches the starter of the form's problem by its URL."""
    script = (Path(settings.BASE_DIR) / "static/kbsite/starter-picker.js").read_text()
    for wiring in (
        'pickProblem.addEventListener("change"',
        'formProblem.addEventListener("change"',
        'pickBackend.addEventListener("change"',
        'formBackend.addEventListener("change"',
        "formProblem.value = chosen.pk",
        "pickProblem.value = slug",
        "bySlug[slug].starter",
        'getElementById("starter-problems")',
    ):
        assert wiring in script, wiring


def test_the_competition_entry_form_has_the_same_wiring(client, user, sprint):
    client.force_login(user)
    page = client.get(sprint.get_absolute_url()).content.decode()
    assert 'data-form="entry-form"' in picker_of(page)
    assert [c["slug"] for c in starter_problems(page)] == ["level1/1_P1", "level1/2_P2"]
    assert reverse("api_problem_starter", args=[1, "2_P2"]) in page
