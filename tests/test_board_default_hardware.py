"""Boards land on a hardware with data (leaderboard.selectors.default_hardware, used by the
leaderboards and people pages of leaderboard/views.py): the only hardware, else the one with the
most evaluated submissions on its boards; an empty `hardware=` still asks for every hardware."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from evaluation.services import hardware_register
from leaderboard.selectors import default_hardware
from submissions.runs.models import Model
from tests.leaderboard_factory import make_problem, make_result

pytestmark = pytest.mark.django_db


def chosen(html: str) -> str:
    """The hardware the filters' select has chosen ("" for every hardware)."""
    select = html.split('name="hardware"')[1].split("</select>")[0]
    for option in select.split("<option")[1:]:
        if " selected" in option.split(">")[0]:
            return option.split('value="')[1].split('"')[0]
    return ""


def test_no_hardware_means_no_default():
    assert default_hardware() is None
    assert chosen(Client().get("/leaderboard/").content.decode()) == ""


def test_the_only_hardware_is_chosen_even_before_any_result():
    cpu = hardware_register(slug="cpu", name="CPU", kind="cpu")
    assert default_hardware() == cpu
    for path in ("/leaderboard/", "/leaderboard/people/"):
        assert chosen(Client().get(path).content.decode()) == "cpu", path


def test_with_several_the_one_with_the_most_evaluations_is_chosen_and_shown():
    hardware_register(slug="a100", name="A100", kind="gpu")  # registered first, no results
    gpu = hardware_register(slug="h200", name="H200", kind="gpu")
    problem = make_problem(1, 1)
    ada = get_user_model().objects.create_user(username="ada", password="a-long-passphrase-1")
    llm = Model.objects.create(litellm_name="openai/gpt-test", display_name="GPT Test")
    make_result(problem=problem, hardware=gpu, user=ada, ms=1.0)
    make_result(problem=problem, hardware=gpu, model=llm, ms=2.0)
    assert default_hardware() == gpu

    home = Client().get("/leaderboard/").content.decode()
    assert chosen(home) == "h200"
    assert "GPT Test" in home.split('id="models-table"')[1].split("</table>")[0]
    people = Client().get("/leaderboard/people/").content.decode()
    assert chosen(people) == "h200"
    assert ">ada<" in people.split('id="people-table"')[1]


def test_an_empty_choice_shows_every_hardware():
    cpu = hardware_register(slug="cpu", name="CPU", kind="cpu")
    gpu = hardware_register(slug="h200", name="H200", kind="gpu")
    problem = make_problem(1, 1)
    llm = Model.objects.create(litellm_name="openai/gpt-test", display_name="GPT Test")
    make_result(problem=problem, hardware=gpu, model=llm, ms=1.0)
    make_result(problem=problem, hardware=gpu, model=llm, ms=0.5)
    make_result(problem=problem, hardware=cpu, model=llm, ms=3.0)

    response = Client().get("/leaderboard/?hardware=")

    assert response.status_code == 200
    html = response.content.decode()
    assert chosen(html) == "" and "all hardware" in html
    table = html.split('id="models-table"')[1].split("</table>")[0]
    assert "h200" in table and "cpu" in table


def test_an_asked_for_hardware_wins_over_the_default():
    hardware_register(slug="cpu", name="CPU", kind="cpu")
    gpu = hardware_register(slug="h200", name="H200", kind="gpu")
    make_result(problem=make_problem(1, 1), hardware=gpu,
                model=Model.objects.create(litellm_name="x/y", display_name="Y"), ms=1.0)
    assert chosen(Client().get("/leaderboard/?hardware=cpu").content.decode()) == "cpu"


def test_new_model_rows_still_arrive_live_on_the_default_hardware_but_not_under_a_level():
    hardware_register(slug="cpu", name="CPU", kind="cpu")
    make_problem(1, 1)  # the level filter offers the levels that have problems

    def live(path: str) -> tuple[str, str]:
        marker = Client().get(path).content.decode().split('id="leaderboard-live"')[1]
        marker = marker.split(">")[0]
        return (marker.split('data-hardware="')[1].split('"')[0],
                marker.split('data-filtered="')[1].split('"')[0])

    # boards.js adds a new row for the hardware shown unless a level filter is on.
    assert live("/leaderboard/") == ("cpu", "")
    assert live("/leaderboard/?level=1") == ("cpu", "1")
