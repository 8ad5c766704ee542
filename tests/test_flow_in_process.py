"""Flows 1-3 in this process: the web form stores and queues, a runner's worker evaluates (the
runner's own services, the stand-in harness in place of the sandboxed child), and every change
reaches a websocket client through the relay, as events.

tests/test_submission_flow.py runs the same flow across real processes (slow tier).
"""

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.utils.module_loading import import_string
from django_q.models import OrmQ

from kbsite.asgi import application
from submissions.models import Submission
from tests.conftest import kernel_source
from tests.test_submission_flow import collect_until_finished, submit_through_form

pytestmark = pytest.mark.django_db(transaction=True)


def run_queued_tasks() -> list[str]:
    """A runner's worker: every queued task, oldest first."""
    outcomes = []
    while queued := OrmQ.objects.filter(key="cpu").order_by("pk").first():
        task = queued.task
        queued.delete()
        outcomes.append(import_string(task["func"])(*task["args"], **task["kwargs"]))
    return outcomes


async def test_a_form_submission_is_evaluated_and_its_changes_stream_to_a_websocket(
    user, cpu_hardware, relu_problem, harness, settings, monkeypatch
):
    settings.REVERIFY_NEW_RECORDS = False  # a first result would also queue a re-verification
    monkeypatch.setenv("KBSITE_RUNNER_NAME", "worker:1")
    client = Client()
    await sync_to_async(client.force_login)(user)
    right = await sync_to_async(submit_through_form)(
        client, problem=relu_problem, source=kernel_source("relu_correct.py")
    )
    wrong = await sync_to_async(submit_through_form)(
        client, problem=relu_problem, source=kernel_source("relu_wrong.py")
    )
    assert right.status == wrong.status == Submission.Status.QUEUED

    listeners = {}
    for submission in (right, wrong):
        communicator = WebsocketCommunicator(
            application, f"/ws/submissions/{submission.pk}/",
            headers=[(b"origin", b"http://127.0.0.1")],
        )
        assert (await communicator.connect())[0]
        snapshot = await communicator.receive_json_from(timeout=10)
        assert snapshot["type"] == "snapshot" and snapshot["status"] == "queued"
        listeners[submission.pk] = communicator

    harness.events = [{"type": "phase", "phase": "trials"}]
    harness.will_return(ms=1.0)
    harness.will_return(verdict="incorrect")
    assert await sync_to_async(run_queued_tasks)() == ["correct", "incorrect"]
    # Each job is the submission's own source, with a seed of its own.
    assert [job["candidate_source"] for job in harness.jobs] == [right.source, wrong.source]
    assert harness.jobs[0]["seed"] != harness.jobs[1]["seed"]

    right_events = await collect_until_finished(listeners[right.pk], timeout=30)
    wrong_events = await collect_until_finished(listeners[wrong.pk], timeout=30)
    for communicator in listeners.values():
        await communicator.disconnect()
    for events in (right_events, wrong_events):
        statuses = [event.get("status") for event in events]
        assert "running" in statuses, statuses
        assert any(event.get("type") == "progress" for event in events), events
    assert right_events[-1]["verdict"] == "correct"
    assert right_events[-1]["evaluation"]["candidate_ms"] == pytest.approx(1.0)
    assert wrong_events[-1]["verdict"] == "incorrect"

    await sync_to_async(right.refresh_from_db)()
    assert (right.verdict, right.attempts) == ("correct", 1)
    assert await sync_to_async(right.evaluations.count)() == 1
