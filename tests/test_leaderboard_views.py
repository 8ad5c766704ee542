"""Leaderboard pages and their CSV/JSON downloads."""

import csv
import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from evaluation.services import hardware_register
from submissions.runs.models import Model, Run
from tests.leaderboard_factory import make_problem, make_result

pytestmark = pytest.mark.django_db


@pytest.fixture
def gpu(db):
    return hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")


@pytest.fixture
def board(gpu):
    """A board with two ranked users, a model, and a flagged kernel."""
    make = get_user_model().objects.create_user
    ada, bob, eve = (
        make(username=n, password="a-long-passphrase-1") for n in ("ada", "bob", "eve")
    )
    llm = Model.objects.create(litellm_name="openai/gpt-test", display_name="GPT Test")
    problem = make_problem(1, 19)
    make_result(problem=problem, hardware=gpu, user=ada, ms=2.0)
    make_result(problem=problem, hardware=gpu, user=bob, ms=1.0)
    make_result(problem=problem, hardware=gpu, model=llm, ms=4.0, speedup_compile=0.5)
    make_result(problem=problem, hardware=gpu, user=eve, ms=0.01, flags=("timing_underreported",))
    return {"problem": problem, "ada": ada, "bob": bob, "eve": eve, "llm": llm}


def board_url(problem, hardware="h200") -> str:
    return f"/leaderboard/{problem.level}/{problem.number}/{hardware}/"


def test_the_board_page_ranks_participants_and_shows_flagged_kernels_apart(board):
    response = Client().get(board_url(board["problem"]))
    assert response.status_code == 200
    html = response.content.decode()
    ranked = html.split('id="board-ranked"')[1].split("</table>")[0]
    assert ranked.index(">bob<") < ranked.index(">ada<") < ranked.index(">GPT Test<")
    assert "eve" not in ranked
    flagged = html.split('id="board-flagged"')[1].split("</table>")[0]
    assert "eve" in flagged and "timing_underreported" in flagged
    assert "<svg" in html and "Record for level1/19_P19 on h200" in html


def test_the_board_downloads_as_csv_and_json(board):
    client = Client()
    response = client.get(board_url(board["problem"]) + "?format=csv&table=board")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="level1-19_P19-h200-board.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["rank"], r["participant"], r["candidate_ms"]) for r in rows] == [
        ("1", "bob", "1.0"),
        ("2", "ada", "2.0"),
        ("3", "GPT Test", "4.0"),
    ]

    response = client.get(board_url(board["problem"]) + "?format=json&table=flagged")
    data = json.loads(response.content)
    assert data["table"] == "flagged"
    assert [(r["participant"], r["flags"]) for r in data["rows"]] == [
        ("eve", ["timing_underreported"])
    ]
    assert "html" not in data["rows"][0]


def test_a_bad_export_request_says_what_is_wrong(board):
    client = Client()
    response = client.get(board_url(board["problem"]) + "?format=xlsx")
    assert response.status_code == 400
    assert "Unknown format 'xlsx'" in response.content.decode()
    response = client.get(board_url(board["problem"]) + "?format=csv&table=secrets")
    assert response.status_code == 400
    assert "board, flagged, records" in response.content.decode()


def test_an_unknown_board_is_not_found(board):
    assert Client().get(board_url(board["problem"], hardware="tpu")).status_code == 404
    assert Client().get("/leaderboard/9/9/h200/").status_code == 404


def test_the_global_page_shows_models_records_and_busiest_problems(board):
    response = Client().get("/leaderboard/")
    assert response.status_code == 200
    html = response.content.decode()
    models = html.split('id="models-table"')[1].split("</table>")[0]
    assert "GPT Test" in models and "100.0%" in models  # 1 of 1 problems correct
    records = html.split('id="records-table"')[1].split("</table>")[0]
    # ada set the first record (2 ms), bob beat it (1 ms); the slower model and the flagged
    # kernel set none. Newest first.
    assert records.count("<tr data-key=") == 2
    assert records.index(">bob<") < records.index(">ada<")
    assert "level1/19_P19" in html.split('id="busiest-table"')[1]
    assert html.count("<svg") == 2


def test_the_models_table_downloads_with_flat_fast_p_columns(board):
    response = Client().get("/leaderboard/?hardware=h200&format=csv&table=models")
    [row] = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert row["model"] == "GPT Test"
    assert (row["fast_p.0"], row["fast_p.0.5"], row["fast_p.1"]) == ("1.0", "0.0", "0.0")


def test_bad_filters_are_rejected_with_a_message(board):
    response = Client().get("/leaderboard/?level=zero&hardware=tpu")
    assert response.status_code == 400
    html = response.content.decode()
    # Both filters are selects now: a value not offered is named as such.
    assert "level: Select a valid choice" in html and "hardware: Select a valid choice" in html


def test_the_model_page_shows_its_summary_runs_and_problems(board, gpu):
    run = Run.objects.create(name="sweep-1", model=board["llm"], hardware=gpu)
    run.problems.set([board["problem"]])
    response = Client().get(f"/leaderboard/models/{board['llm'].pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "sweep-1" in html and "level1/19_P19" in html
    response = Client().get(f"/leaderboard/models/{board['llm'].pk}/?format=json&table=entries")
    assert json.loads(response.content)["rows"][0]["rank"] == 3


def test_the_user_page_counts_ranked_kernels_and_first_places(board):
    html = Client().get("/leaderboard/users/bob/").content.decode()
    assert "1 ranked kernel" in html and "1 first place" in html
    assert Client().get("/leaderboard/users/nobody/").status_code == 404


def test_a_run_page_and_its_eval_results_download(board, gpu):
    llm = board["llm"]
    other = make_problem(2, 3)
    run = Run.objects.create(name="sweep-2", model=llm, hardware=gpu)
    run.problems.set([board["problem"], other])
    make_result(problem=other, hardware=gpu, model=llm, run=run, ms=1.0)

    html = Client().get(f"/leaderboard/runs/{run.pk}/").content.decode()
    assert "eval_results.json (level 2)" in html

    response = Client().get(f"/leaderboard/runs/{run.pk}/eval_results.json")
    assert response.status_code == 400
    assert "choose one with ?level=" in response.content.decode()
    response = Client().get(f"/leaderboard/runs/{run.pk}/eval_results.json?level=2")
    assert response.status_code == 200
    assert list(json.loads(response.content)) == ["3"]
    response = Client().get(f"/leaderboard/runs/{run.pk}/eval_results.json?level=two")
    assert response.status_code == 400


def test_a_retired_problems_board_stays_readable_with_a_notice(board):
    board["problem"].retire()
    html = Client().get(board_url(board["problem"])).content.decode()
    assert "This problem is retired" in html and ">bob<" in html
