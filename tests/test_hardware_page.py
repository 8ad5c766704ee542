from datetime import timedelta

import pytest
from django.utils import timezone

from evaluation.models import Runner
from evaluation.services import hardware_register, runner_heartbeat
from submissions.services import submission_create
from tests.conftest import kernel_source

pytestmark = pytest.mark.django_db


def test_it_shows_online_and_offline_runners_with_what_they_run_and_the_queue(
    client, user, cpu_hardware, relu_problem
):
    submission = submission_create(
        user=user, problem=relu_problem, source=kernel_source("relu_correct.py"),
        backend="torch", hardware=cpu_hardware,
    )
    runner_heartbeat(name="host-a:cpu:1", hardware=cpu_hardware, host="host-a", pid=1)
    Runner.objects.filter(name="host-a:cpu:1").update(current_submission_id=submission.pk)
    runner_heartbeat(name="host-b:cpu:2", hardware=cpu_hardware, host="host-b", pid=2)
    Runner.objects.filter(name="host-b:cpu:2").update(
        last_seen=timezone.now() - timedelta(hours=1)
    )

    page = client.get("/hardware/").content.decode()

    assert "host-a:cpu:1" in page and "host-b:cpu:2" in page
    assert page.count('class="online"') == 1 and page.count('class="offline"') == 1
    assert f"#{submission.pk}" in page
    assert 'queued <strong class="queued">1</strong>' in page
    assert "No runner is serving cpu" not in page


def test_it_says_plainly_when_nobody_serves_a_hardware(client):
    hardware_register(slug="h200", name="NVIDIA H200", kind="gpu", backends=["cuda"])
    page = client.get("/hardware/").content.decode()
    assert "No runner is serving h200 right now" in page
    assert "No runner has registered for this hardware." in page
