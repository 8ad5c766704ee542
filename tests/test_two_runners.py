"""Several runners of one hardware share its queue; live updates cross processes in any setup."""

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings

from evaluation.models import Runner
from kbsite.asgi import application
from kbsite.live import layer_is_shared, relay
from submissions.models import Evaluation, Submission
from submissions.services import submission_create
from tests.conftest import kernel_source, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

# Enough that both runners take some while either evaluates (was 40, then 10: a minute and a
# half on two cores; both runners serve before the first is queued, so each takes a share).
COUNT = 6


@pytest.mark.timeout(600)
def test_two_runners_share_one_queue_and_evaluate_each_submission_exactly_once(
    user, cpu_hardware, relu_problem, start_runner
):
    """Slow: two real runner processes, each with its own django-q cluster, pulling from one
    queue at once; only real processes race for the same tasks and claims."""
    first, second = start_runner(), start_runner()
    # Both serving before the work arrives, so each has its share to take.
    wait_for(lambda: Runner.objects.filter(hardware=cpu_hardware).count() >= 2, timeout=120)
    sources = [kernel_source("relu_correct.py"), kernel_source("relu_wrong.py")]
    submissions = [
        submission_create(
            user=user, problem=relu_problem, source=sources[i % 2], backend="torch",
            hardware=cpu_hardware,
        )
        for i in range(COUNT)
    ]
    ids = [s.pk for s in submissions]
    wait_for(
        lambda: not Submission.objects.filter(pk__in=ids).exclude(status="finished").exists(),
        timeout=400,
        interval=1,
    )
    evaluations = Evaluation.objects.filter(submission_id__in=ids)
    assert evaluations.count() == COUNT
    assert sorted(evaluations.values_list("submission_id", flat=True)) == sorted(ids)
    took_work = set(evaluations.values_list("runner_name", flat=True))
    assert any(str(first.pid) in name for name in took_work)
    assert any(str(second.pid) in name for name in took_work)
    verdicts = dict(Submission.objects.filter(pk__in=ids).values_list("pk", "verdict"))
    errors = dict(evaluations.values_list("submission_id", "error"))
    assert [verdicts[pk] for pk in ids] == ["correct", "incorrect"] * (COUNT // 2), errors


async def test_a_runners_event_reaches_a_websocket_client_through_the_configured_layer(
    user, cpu_hardware, relu_problem, start_runner
):
    """Slow: the event comes from another process (a real runner), the path flow 3 requires
    to cross processes in every setup; in process there is nothing to cross."""
    submission = await sync_to_async(submission_create)(
        user=user, problem=relu_problem, source=kernel_source("relu_correct.py"),
        backend="torch", hardware=cpu_hardware,
    )
    communicator = WebsocketCommunicator(
        application, f"/ws/submissions/{submission.pk}/", headers=[(b"origin", b"http://127.0.0.1")]
    )
    assert (await communicator.connect())[0]
    assert (await communicator.receive_json_from(timeout=10))["status"] == "queued"
    await sync_to_async(start_runner)()
    statuses = []
    while "finished" not in statuses:
        statuses.append((await communicator.receive_json_from(timeout=180)).get("status"))
    await communicator.disconnect()
    assert "running" in statuses
    if settings.REDIS_URL:
        # Scaled setup: straight through channels-redis, no relay in this process.
        assert type(get_channel_layer()).__name__ == "RedisChannelLayer"
        assert layer_is_shared() and relay.task is None
    else:
        assert not layer_is_shared() and relay.task is not None
