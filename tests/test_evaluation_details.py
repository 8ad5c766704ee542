"""Error text, compiler output, tracebacks and logs quote the source: on a private problem they go
to the submission's owner and staff only (selectors.can_see_details), on the submission page, its
status JSON, the REST API, the KernelBench export, websocket and server-sent live events; others
get the verdict and a generic message."""

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.test import AsyncClient, Client

from kbsite.live import publish, submission_group
from problems.models import Problem
from submissions.consumers import SubmissionConsumer
from submissions.models import Evaluation, Submission
from submissions.selectors import GENERIC_ERRORS, submission_status_payload
from submissions.services import submission_create
from tests.api_support import token_for
from tests.conftest import kernel_source

SECRET = "kernel.cu:12: error: secret_tile_size_417 was not declared"
GENERIC = GENERIC_ERRORS["compile_error"]


@pytest.fixture
def private_problem(relu_problem):
    relu_problem.code_visibility = Problem.CodeVisibility.OWNER
    relu_problem.save(update_fields=["code_visibility"])
    return relu_problem


@pytest.fixture
def stranger(db):
    return get_user_model().objects.create_user(username="eve", password="a-long-passphrase-2")


@pytest.fixture
def staff(db):
    return get_user_model().objects.create_user(
        username="root", password="a-long-passphrase-3", is_staff=True
    )


def submit(user, problem, hardware) -> Submission:
    return submission_create(
        user=user, problem=problem, source=kernel_source("relu_correct.py"), backend="torch",
        hardware=hardware,
    )


def finish(submission: Submission) -> Evaluation:
    evaluation = Evaluation.objects.create(
        submission=submission, hardware=submission.hardware,
        problem_version=submission.problem_version, source_hash=submission.source_hash,
        verdict="compile_error", error=SECRET, compile_log=f"nvcc: {SECRET}",
        traceback=f"Traceback: {SECRET}", logs=f"printed {SECRET}",
    )
    submission.mark_finished(verdict="compile_error")
    return evaluation


def client_for(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def finished(user, private_problem, cpu_hardware):
    submission = submit(user, private_problem, cpu_hardware)
    finish(submission)
    return submission


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["owner", "staff"])
def test_it_shows_the_owner_and_staff_every_detail(who, finished, user, staff):
    viewer = client_for(user if who == "owner" else staff)
    page = viewer.get(f"/submissions/{finished.pk}/").content.decode()
    assert page.count(SECRET) >= 4  # error (twice: summary and evaluation), log, traceback
    assert "nvcc:" in page and "Traceback:" in page
    status = viewer.get(f"/submissions/{finished.pk}/status.json").json()
    assert status["verdict"] == "compile_error" and status["evaluation"]["error"] == SECRET
    api = Client(HTTP_AUTHORIZATION=f"Token {token_for(user if who == 'owner' else staff)}")
    body = api.get(f"/api/v1/submissions/{finished.pk}/").json()
    assert body["error"] == body["evaluation"]["error"] == SECRET
    assert SECRET in body["evaluation"]["compile_log"] and SECRET in body["evaluation"]["logs"]


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["anonymous", "stranger"])
def test_it_gives_everyone_else_the_verdict_and_a_generic_message(who, finished, stranger):
    viewer = client_for(stranger if who == "stranger" else None)
    page = viewer.get(f"/submissions/{finished.pk}/").content.decode()
    assert SECRET not in page and GENERIC in page and "compile_error" in page
    fragment = viewer.get(f"/submissions/{finished.pk}/evaluation/").content.decode()
    assert SECRET not in fragment and GENERIC in fragment
    status = viewer.get(f"/submissions/{finished.pk}/status.json").json()
    assert status["verdict"] == "compile_error" and status["evaluation"]["error"] == GENERIC
    if who == "stranger":
        api = Client(HTTP_AUTHORIZATION=f"Token {token_for(stranger)}")
        raw = api.get(f"/api/v1/submissions/{finished.pk}/").content.decode()
        assert SECRET not in raw
        body = json.loads(raw)
        assert body["verdict"] == "compile_error"
        assert body["error"] == body["evaluation"]["error"] == GENERIC
        assert body["evaluation"]["compile_log"] is None and body["evaluation"]["traceback"] is None


@pytest.mark.django_db
def test_it_builds_live_events_without_details(finished):
    # Published by runners to every viewer of the submission.
    payload = submission_status_payload(finished)
    assert payload["evaluation"]["error"] == GENERIC and SECRET not in json.dumps(payload)


@pytest.mark.django_db
def test_it_keeps_the_error_text_out_of_a_runs_kernelbench_export_for_others(
    finished, user, stranger
):
    from leaderboard import selectors
    from submissions.runs.models import Model, Run
    from submissions.runs.samples import run_sample_refresh

    model = Model.objects.create(litellm_name="test/model")
    run = Run.objects.create(name="sweep", model=model, hardware=finished.hardware,
                             created_by=user)
    run.problems.set([finished.problem])
    Submission.objects.filter(pk=finished.pk).update(run=run, model=model)
    # The run's sample, as the runner keeps it once a result lands.
    run_sample_refresh(submission=Submission.objects.get(pk=finished.pk))
    mine = json.dumps(selectors.run_eval_results(run, viewer=user))
    theirs = json.dumps(selectors.run_eval_results(run, viewer=stranger))
    assert SECRET in mine and SECRET not in theirs and GENERIC in theirs


async def websocket_messages(submission, user, then=None) -> list[dict]:
    communicator = WebsocketCommunicator(SubmissionConsumer.as_asgi(),
                                         f"/ws/submissions/{submission.pk}/")
    communicator.scope["user"] = user  # as channels' AuthMiddlewareStack sets it
    communicator.scope["url_route"] = {"kwargs": {"submission_id": submission.pk}}
    connected, _ = await communicator.connect()
    assert connected
    messages = [await communicator.receive_json_from(timeout=10)]
    if then is not None:
        await sync_to_async(then)()
        messages.append(await communicator.receive_json_from(timeout=10))
    await communicator.disconnect()
    return messages


@pytest.mark.django_db(transaction=True)
async def test_it_gives_websocket_viewers_details_by_the_same_rule(user, stranger, staff,
                                                                  private_problem, cpu_hardware):
    submission = await sync_to_async(submit)(user, private_problem, cpu_hardware)

    def finish_and_publish():
        finish(submission)
        submission.refresh_from_db()
        publish(submission_group(submission.pk),
                {"type": "status", **submission_status_payload(submission)})

    # Live: the stranger's stream carries the generic message, the owner's the error text.
    theirs = await websocket_messages(submission, stranger, then=None)
    assert theirs[0]["type"] == "snapshot" and theirs[0]["evaluation"] is None
    owner_messages = await websocket_messages(submission, user, then=finish_and_publish)
    assert owner_messages[-1]["evaluation"]["error"] == SECRET
    # Snapshots, once finished.
    for viewer, expected in ((user, SECRET), (staff, SECRET), (stranger, GENERIC),
                             (AnonymousUser(), GENERIC)):
        (snapshot,) = await websocket_messages(submission, viewer)
        assert snapshot["evaluation"]["error"] == expected, viewer


async def read_events(response) -> list[dict]:
    async def collect():
        return [chunk async for chunk in response.streaming_content]

    body = b"".join(await asyncio.wait_for(collect(), 30)).decode()
    return [json.loads(line[len("data: "):]) for line in body.splitlines()
            if line.startswith("data: ")]


@pytest.mark.django_db(transaction=True)
async def test_it_gives_server_sent_event_viewers_details_by_the_same_rule(
    user, stranger, private_problem, cpu_hardware
):
    submission = await sync_to_async(submit)(user, private_problem, cpu_hardware)
    url = f"/api/v1/submissions/{submission.pk}/events/"
    owner_token = await sync_to_async(token_for)(user)
    mine = await AsyncClient().get(url, headers={"Authorization": f"Token {owner_token}"})
    theirs = await AsyncClient().get(url)
    readers = [asyncio.ensure_future(read_events(r)) for r in (mine, theirs)]
    await asyncio.sleep(0.5)

    def finish_and_publish():
        finish(submission)
        submission.refresh_from_db()
        publish(submission_group(submission.pk),
                {"type": "status", **submission_status_payload(submission)})

    await sync_to_async(finish_and_publish)()
    mine_events, their_events = [await reader for reader in readers]
    assert mine_events[-1]["evaluation"]["error"] == SECRET
    assert their_events[-1]["evaluation"]["error"] == GENERIC
    assert SECRET not in json.dumps(their_events)
