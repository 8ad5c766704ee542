"""Flow 1-3 end to end: web form -> django-q2 cluster in a runner process -> websocket events."""

import asyncio
import json
import os

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from kbsite.asgi import application
from submissions.models import Submission
from tests.conftest import kernel_source, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def submit_through_form(client: Client, *, problem, source: str) -> Submission:
    response = client.post(
        "/submissions/new/",
        {
            "problem": problem.pk,
            "backend": "torch",
            "hardware": "cpu",
            "precision": "fp32",
            "source": source,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    return Submission.objects.get(pk=int(response["Location"].rstrip("/").split("/")[-1]))


async def collect_until_finished(communicator: WebsocketCommunicator, timeout: float) -> list[dict]:
    events = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        remaining = deadline - loop.time()
        assert remaining > 0, f"no finished event; saw {[e.get('status') for e in events]}"
        event = await communicator.receive_json_from(timeout=remaining)
        events.append(event)
        if event.get("status") == "finished":
            return events


@pytest.fixture
def logged_in_client(user):
    client = Client()
    client.force_login(user)
    return client


async def test_a_form_submission_is_evaluated_by_a_runner_and_streamed_live(
    cpu_hardware, relu_problem, logged_in_client, start_runner
):
    """Slow: the whole path across real processes (web, a runner's django-q cluster, the
    sandboxed harness, events back through the relay) with real timings and phases;
    tests/test_flow_in_process.py covers the same logic in process."""
    right = await sync_to_async(submit_through_form)(
        logged_in_client, problem=relu_problem, source=kernel_source("relu_correct.py")
    )
    wrong = await sync_to_async(submit_through_form)(
        logged_in_client, problem=relu_problem, source=kernel_source("relu_wrong.py")
    )
    assert right.status == wrong.status == Submission.Status.QUEUED

    # Subscribe before any runner exists, so every change must arrive as a live event.
    listeners = {}
    for submission in (right, wrong):
        communicator = WebsocketCommunicator(
            application, f"/ws/submissions/{submission.pk}/", headers=[(b"origin", b"http://127.0.0.1")]
        )
        connected, _ = await communicator.connect()
        assert connected
        snapshot = await communicator.receive_json_from(timeout=10)
        assert snapshot["type"] == "snapshot" and snapshot["status"] == "queued"
        listeners[submission.pk] = communicator

    await sync_to_async(start_runner)()
    right_events = await collect_until_finished(listeners[right.pk], timeout=240)
    wrong_events = await collect_until_finished(listeners[wrong.pk], timeout=240)
    for communicator in listeners.values():
        await communicator.disconnect()

    for events in (right_events, wrong_events):
        statuses = [event.get("status") for event in events]
        assert "running" in statuses, statuses
        assert statuses[-1] == "finished"
    assert right_events[-1]["verdict"] == "correct"
    assert right_events[-1]["evaluation"]["candidate_ms"] > 0
    assert wrong_events[-1]["verdict"] == "incorrect"

    await sync_to_async(right.refresh_from_db)()
    await sync_to_async(wrong.refresh_from_db)()
    assert (right.verdict, wrong.verdict) == ("correct", "incorrect")
    assert await sync_to_async(right.evaluations.count)() == 1
    # When it was timed, and when each phase began, kept with the result: what tells a timing
    # disturbed by another evaluation from a slow kernel (bench/gpu_sharing.py).
    report = (await sync_to_async(lambda: right.latest_evaluation)()).static_report
    began = dict(report["phase_log"])
    start, end = report["timing"]["window"]
    assert began["timing"] <= start <= end <= began["profiling"] <= began["teardown"]
    assert report["timing"]["candidate"]["n"] > 0


def test_the_candidate_runs_in_neither_the_web_nor_the_runner_process(
    cpu_hardware, relu_problem, logged_in_client, start_runner
):
    """Slow: where the candidate's code runs (pid, uid, namespace, environment) is a fact about
    real processes only."""
    submission = submit_through_form(
        logged_in_client, problem=relu_problem, source=kernel_source("relu_records_pid.py")
    )
    runner = start_runner()

    wait_for(
        lambda: Submission.objects.get(pk=submission.pk).status == Submission.Status.FINISHED,
        timeout=240,
    )
    submission.refresh_from_db()
    assert submission.verdict == "correct"
    logs = submission.latest_evaluation.logs
    runs = [json.loads(line.split("KB-RECORD ", 1)[1]) for line in logs.splitlines()
            if "KB-RECORD " in line]
    assert runs, f"the kernel never ran (logs: {logs[:500]!r})"

    for run in runs:
        assert run["pid"] not in {os.getpid(), runner.pid}
        # Neither the web process nor the runner: Django is not even loaded there,
        # and the child has no database settings in its environment.
        assert run["django_loaded"] is False
        assert run["env_has_database"] is False
        # Inside the sandbox: its own pid namespace, and not the runner's uid.
        assert run["pid"] < 100
        assert run["uid"] != os.getuid()
