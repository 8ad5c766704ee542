"""A queued submission's place and wait (submissions.selectors.queue_position, queue_estimate,
queue_text): its place among the work its hardware's runners can claim, and about how long until
its result from the median duration of the hardware's latest evaluations."""

from datetime import timedelta

import pytest
from django.utils import timezone

from evaluation.models import Runner
from evaluation.services import hardware_register
from submissions.models import Evaluation, Reverification, Submission
from submissions.selectors import (
    evaluation_seconds,
    queue_estimate,
    queue_position,
    queue_text,
    submission_status_payload,
)
from tests.leaderboard_factory import make_problem, make_result, make_submission

pytestmark = pytest.mark.django_db


@pytest.fixture
def cpu(db):
    return hardware_register(slug="cpu", name="CPU", kind="cpu", backends=["torch"])


@pytest.fixture
def problem(db):
    return make_problem(1, 1)


def queued(problem, hardware, *, minutes_ago: float, **changes) -> Submission:
    submission = make_submission(problem=problem, hardware=hardware)
    Submission.objects.filter(pk=submission.pk).update(
        **{"status": Submission.Status.QUEUED, **changes},
        created_at=timezone.now() - timedelta(minutes=minutes_ago),
    )
    submission.refresh_from_db()
    return submission


def evaluated(problem, hardware, *, seconds: float) -> Evaluation:
    evaluation = make_result(problem=problem, hardware=hardware)
    Evaluation.objects.filter(pk=evaluation.pk).update(
        started_at=evaluation.finished_at - timedelta(seconds=seconds)
    )
    return evaluation


def online_runner(hardware, name: str) -> Runner:
    return Runner.objects.create(name=name, hardware=hardware, last_seen=timezone.now())


def test_the_position_counts_the_claimable_work_queued_before_it_on_its_hardware(cpu, problem):
    gpu = hardware_register(slug="h200", name="H200", kind="gpu")
    queued(problem, cpu, minutes_ago=10)
    queued(problem, gpu, minutes_ago=9)  # another hardware's queue
    # Running on a lease that lapsed (its runner died): a runner can claim it again.
    queued(problem, cpu, minutes_ago=8, status=Submission.Status.RUNNING,
           lease_expires_at=timezone.now() - timedelta(seconds=5))
    # Running on a live lease: being evaluated, not waiting.
    queued(problem, cpu, minutes_ago=7, status=Submission.Status.RUNNING,
           lease_expires_at=timezone.now() + timedelta(seconds=60))
    earlier = make_submission(problem=problem, hardware=cpu)
    Reverification.objects.create(submission=earlier, reason="admin",
                                  created_at=timezone.now() - timedelta(minutes=6))
    mine = queued(problem, cpu, minutes_ago=5)
    later = queued(problem, cpu, minutes_ago=1)

    # the queued one, the lapsed one, the re-verification, then this one
    assert queue_position(mine) == 4
    assert queue_position(later) == 5


def test_a_submission_out_of_the_queue_has_no_position_or_estimate(cpu, problem):
    finished = make_submission(problem=problem, hardware=cpu)
    assert queue_position(finished) is None
    assert queue_estimate(finished) is None
    assert submission_status_payload(finished)["queue_text"] == ""


def test_the_duration_is_the_median_of_the_latest_evaluations(cpu, problem):
    assert evaluation_seconds(hardware_id=cpu.pk) is None
    for seconds in (10, 30, 20, 500):
        evaluated(problem, cpu, seconds=seconds)
    assert evaluation_seconds(hardware_id=cpu.pk) == 25
    assert evaluation_seconds(hardware_id=cpu.pk, sample=3) == 30  # 30, 20, 500


def test_the_estimate_shares_the_work_ahead_and_running_among_the_online_runners(cpu, problem):
    for _ in range(3):
        evaluated(problem, cpu, seconds=20)
    online_runner(cpu, "r1")
    queued(problem, cpu, minutes_ago=9)
    queued(problem, cpu, minutes_ago=8)
    queued(problem, cpu, minutes_ago=7, status=Submission.Status.RUNNING,
           lease_expires_at=timezone.now() + timedelta(seconds=60))
    mine = queued(problem, cpu, minutes_ago=1)

    # One runner: the one running, the two ahead, then this one: 4 evaluations of 20 s.
    assert queue_estimate(mine) == {"position": 3, "runners": 1, "seconds": 80}
    assert queue_text(queue_estimate(mine), hardware="cpu") == (
        "position 3 in the queue, result in about 80 s"
    )
    online_runner(cpu, "r2")
    assert queue_estimate(mine)["seconds"] == 40  # two at a time


def test_without_an_online_runner_it_says_so_instead_of_guessing(cpu, problem):
    evaluated(problem, cpu, seconds=20)
    Runner.objects.create(name="gone", hardware=cpu,
                          last_seen=timezone.now() - timedelta(hours=1))
    mine = queued(problem, cpu, minutes_ago=1)

    assert queue_estimate(mine) == {"position": 1, "runners": 0, "seconds": None}
    assert submission_status_payload(mine)["queue_text"] == (
        "position 1 in the queue; no runner of cpu is online now"
    )


def test_without_evaluations_to_time_it_gives_the_position_alone(cpu, problem):
    online_runner(cpu, "r1")
    mine = queued(problem, cpu, minutes_ago=1)
    payload = submission_status_payload(mine)
    assert payload["queue_position"] == 1
    assert payload["queue_text"] == "position 1 in the queue"


def test_the_api_gives_agents_the_position_and_the_estimate(cpu, problem, django_user_model):
    from tests.api_support import SchemaCheckedClient, token_for

    ada = django_user_model.objects.create_user("ada", password="a-long-passphrase-1")
    for _ in range(3):
        evaluated(problem, cpu, seconds=20)
    online_runner(cpu, "r1")
    queued(problem, cpu, minutes_ago=9)
    mine = queued(problem, cpu, minutes_ago=1, user=ada)

    data = SchemaCheckedClient().with_token(token_for(ada)).get(
        f"/api/v1/submissions/{mine.pk}/").json()
    assert (data["queue_position"], data["queue_estimate_s"]) == (2, 40)
