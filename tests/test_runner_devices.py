"""One runner command serves every device of its host, one evaluation per device at a time."""

import pytest
from django.core.management.base import CommandError

from evaluation.models import Hardware, Runner
from gpu_runner.management.commands.runner import parse_devices
from submissions.models import Evaluation, Submission
from submissions.services import submission_create
from tests.conftest import kernel_source, wait_for


def test_it_serves_every_gpu_by_default_and_a_chosen_subset_on_request():
    assert parse_devices(None, 8) == list(range(8))
    assert parse_devices("0,3", 8) == [0, 3]
    assert parse_devices(None, 0) == [None]
    assert parse_devices("3", 0) == [0, 1, 2]


def test_it_refuses_devices_the_host_does_not_have():
    with pytest.raises(CommandError, match="GPUs 0..1"):
        parse_devices("0,2", 2)
    with pytest.raises(CommandError):
        parse_devices("two", 2)


@pytest.mark.django_db(transaction=True)
def test_two_device_slots_share_the_queue_without_overlapping_on_a_device(
    user, cpu_hardware, relu_problem, start_runner
):
    """Slow: a real runner process with two device slots, each a worker process of its own."""
    slow = kernel_source("relu_slow.py").replace("__SLEEP_SECONDS__", "1")
    submissions = [
        submission_create(
            user=user, problem=relu_problem, source=slow, backend="torch", hardware=cpu_hardware
        )
        for _ in range(6)
    ]
    start_runner("cpu", "--devices", "2")
    wait_for(
        lambda: Submission.objects.filter(
            pk__in=[s.pk for s in submissions], status=Submission.Status.FINISHED
        ).count()
        == len(submissions),
        timeout=300,
    )
    assert Hardware.objects.filter(slug="cpu").count() == 1
    runners = Runner.objects.filter(hardware=cpu_hardware)
    assert sorted(r.device_index for r in runners) == [0, 1]

    evaluations = list(Evaluation.objects.filter(submission__in=submissions))
    assert len(evaluations) == len(submissions)
    assert all(e.verdict == "correct" for e in evaluations)
    by_device: dict[str, list[Evaluation]] = {}
    for evaluation in evaluations:
        by_device.setdefault(evaluation.runner_name, []).append(evaluation)
    assert len(by_device) == 2, "both device slots took work"
    for on_one_device in by_device.values():
        spans = sorted((e.started_at, e.finished_at) for e in on_one_device)
        for (_, end), (next_start, _) in zip(spans, spans[1:], strict=False):
            assert end <= next_start, "two evaluations overlapped on one device"
