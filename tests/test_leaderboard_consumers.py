"""Board websockets: a snapshot on connect, then the rows a stored result changes."""

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.urls import path

from evaluation.services import hardware_register
from kbsite.asgi import application
from leaderboard.consumers import LeaderboardConsumer
from submissions.runs.models import Model
from tests.leaderboard_factory import make_problem, make_result

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = [(b"origin", b"http://127.0.0.1")]


def setup_board():
    gpu = hardware_register(slug="h200", kind="gpu")
    make = get_user_model().objects.create_user
    ada = make(username="ada", password="a-long-passphrase-1")
    bob = make(username="bob", password="a-long-passphrase-1")
    problem = make_problem(1, 1)
    make_result(problem=problem, hardware=gpu, user=ada, ms=2.0)
    make_result(problem=problem, hardware=gpu, user=bob, ms=3.0)
    return gpu, problem, ada, bob


async def test_a_board_socket_sends_the_rows_then_the_change_a_result_makes():
    gpu, problem, ada, bob = await sync_to_async(setup_board)()
    socket = WebsocketCommunicator(application, f"/ws/boards/{problem.pk}/h200/", headers=ORIGIN)
    connected, _ = await socket.connect()
    assert connected
    snapshot = await socket.receive_json_from(timeout=10)
    assert snapshot["type"] == "board"
    assert [r["participant"] for r in snapshot["rows"]] == ["ada", "bob"]
    assert all(r["html"].startswith("<tr data-key=") for r in snapshot["rows"])

    # bob beats ada: his row is sent again, the others only move.
    await sync_to_async(make_result)(problem=problem, hardware=gpu, user=bob, ms=1.0)
    change = await socket.receive_json_from(timeout=10)
    await socket.disconnect()

    bob_key, ada_key = f"user:{bob.pk}", f"user:{ada.pk}"
    assert change["type"] == "board_change"
    assert change["order"] == [[bob_key, 1], [ada_key, 2]]
    assert change["changed"] == [bob_key]
    assert [r["candidate_ms"] for r in change["rows"]] == [1.0]


async def test_an_incorrect_result_changes_no_row_but_still_reports_the_order():
    gpu, problem, ada, bob = await sync_to_async(setup_board)()
    socket = WebsocketCommunicator(application, f"/ws/boards/{problem.pk}/h200/", headers=ORIGIN)
    await socket.connect()
    await socket.receive_json_from(timeout=10)
    await sync_to_async(make_result)(problem=problem, hardware=gpu, user=ada, verdict="incorrect")
    change = await socket.receive_json_from(timeout=10)
    await socket.disconnect()
    assert change["changed"] == []
    assert [key for key, _ in change["order"]] == [f"user:{ada.pk}", f"user:{bob.pk}"]


async def test_a_socket_for_an_unknown_board_is_closed():
    await sync_to_async(hardware_register)(slug="h200", kind="gpu")
    socket = WebsocketCommunicator(application, "/ws/boards/999/h200/", headers=ORIGIN)
    connected, code = await socket.connect()
    assert not connected and code == 4404


async def test_the_leaderboard_socket_carries_records_and_model_rows():
    # Routed here directly: the site's route for it is added in kbsite/routing.py.
    router = URLRouter([path("ws/leaderboard/", LeaderboardConsumer.as_asgi())])
    gpu, problem, ada, bob = await sync_to_async(setup_board)()
    llm = await sync_to_async(Model.objects.create)(litellm_name="openai/gpt-test")
    socket = WebsocketCommunicator(router, "/ws/leaderboard/")
    connected, _ = await socket.connect()
    assert connected
    assert (await socket.receive_json_from(timeout=10)) == {"type": "hello"}

    await sync_to_async(make_result)(problem=problem, hardware=gpu, model=llm, ms=0.5)
    result = await socket.receive_json_from(timeout=10)
    await socket.disconnect()

    assert result["type"] == "result" and result["participant_key"] == f"model:{llm.pk}"
    assert result["record"]["candidate_ms"] == 0.5 and result["record"]["previous_ms"] == 2.0
    assert result["entry"]["rank"] == 1
    [row] = result["model_rows"]
    assert row["fast_p"]["1"] == 1.0 and 'data-key="model-' in row["html"]
