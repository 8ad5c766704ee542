"""Quotas on top of the throttles: submissions waiting or running per user at once, and
evaluation seconds per user per UTC day; clear 429 answers, the web form and the profile page."""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.utils import timezone
from django_q.models import OrmQ

from submissions.errors import SubmissionError
from submissions.models import Evaluation, Submission
from submissions.quotas import day_start, quota_usage
from submissions.services import submission_create
from tests.api_support import SchemaCheckedClient, token_for
from tests.conftest import kernel_source

pytestmark = pytest.mark.django_db

RELU = kernel_source("relu_correct.py")


@pytest.fixture
def api(user):
    return SchemaCheckedClient().with_token(token_for(user))


@pytest.fixture
def ready(cpu_hardware, relu_problem):
    return relu_problem


def payload(**overrides) -> dict:
    return {"level": 1, "number": 901, "backend": "torch", "hardware": "cpu", "source": RELU,
            **overrides}


def post(api, **extra):
    return api.post("/api/v1/submissions/", payload(), format="json", **extra)


def stored(user, problem, hardware) -> Submission:
    return submission_create(
        user=user, problem=problem, source=RELU, backend="torch", hardware=hardware
    )


def evaluated(submission: Submission, *, finished_at=None, **fields) -> Evaluation:
    """What a runner leaves behind: the submission finished with one evaluation."""
    finished_at = finished_at or timezone.now()
    Submission.objects.filter(pk=submission.pk).update(
        status=Submission.Status.FINISHED, verdict="correct", finished_at=finished_at
    )
    return Evaluation.objects.create(
        submission=submission,
        hardware_id=submission.hardware_id,
        problem_version_id=submission.problem_version_id,
        verdict="correct",
        correct=True,
        source_hash=submission.source_hash,
        finished_at=finished_at,
        **fields,
    )


# ---- submissions waiting or running at once -----------------------------------------------------


def test_a_user_over_the_queued_limit_gets_429_with_a_code_and_nothing_more_is_stored(
    api, ready, settings
):
    settings.QUOTA_MAX_QUEUED = 2
    assert [post(api).status_code for _ in range(2)] == [202, 202]
    response = post(api)
    assert response.status_code == 429
    body = response.json()
    assert body["code"] == "quota_queued"
    assert "2 submissions waiting or running" in body["detail"]
    assert "limit is 2" in body["detail"]
    assert int(response["Retry-After"]) >= 1 and body["retry_after"] == int(response["Retry-After"])
    assert Submission.objects.count() == 2


def test_finished_submissions_free_the_queued_quota(api, ready, settings):
    settings.QUOTA_MAX_QUEUED = 1
    assert post(api).status_code == 202
    assert post(api).status_code == 429
    evaluated(Submission.objects.get(), phases={"wall": 1.0})
    assert post(api).status_code == 202


def test_running_submissions_count_as_well_as_queued_ones(user, ready, cpu_hardware, settings):
    settings.QUOTA_MAX_QUEUED = 2
    first = stored(user, ready, cpu_hardware)
    Submission.objects.filter(pk=first.pk).update(status=Submission.Status.RUNNING)
    stored(user, ready, cpu_hardware)
    assert quota_usage(user=user).queued == 2
    with pytest.raises(SubmissionError) as error:
        stored(user, ready, cpu_hardware)
    assert error.value.code == "quota_queued"


def test_a_batch_that_would_go_over_the_queued_limit_is_refused_whole(api, ready, settings):
    settings.QUOTA_MAX_QUEUED = 3
    assert post(api).status_code == 202
    response = api.post(
        "/api/v1/submissions/batch/", {"submissions": [payload()] * 3}, format="json"
    )
    assert response.status_code == 429
    assert response.json()["code"] == "quota_queued"
    assert "this request adds 3" in response.json()["detail"]
    assert Submission.objects.count() == 1
    ok = api.post("/api/v1/submissions/batch/", {"submissions": [payload()] * 2}, format="json")
    assert ok.status_code == 202
    assert Submission.objects.count() == 3


def test_a_retried_request_with_its_idempotency_key_is_answered_even_at_the_limit(
    api, ready, settings
):
    settings.QUOTA_MAX_QUEUED = 1
    first = post(api, HTTP_IDEMPOTENCY_KEY="attempt-1")
    again = post(api, HTTP_IDEMPOTENCY_KEY="attempt-1")
    assert (first.status_code, again.status_code) == (202, 202)
    assert first.json()["id"] == again.json()["id"]
    assert post(api, HTTP_IDEMPOTENCY_KEY="attempt-2").status_code == 429


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_of_one_user_cannot_pass_the_queued_limit_together(
    user, ready, settings
):
    settings.QUOTA_MAX_QUEUED = 3
    key = token_for(user)
    statuses: list[int] = []
    start = threading.Barrier(8)

    def submit() -> None:
        client = Client(HTTP_AUTHORIZATION=f"Token {key}")
        try:
            start.wait()
            response = client.post(
                "/api/v1/submissions/", payload(), content_type="application/json"
            )
            statuses.append(response.status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(statuses) == [202] * 3 + [429] * 5
    assert Submission.objects.filter(user=user).count() == 3
    assert OrmQ.objects.count() == 3  # one task per stored submission, none for the refused


# ---- evaluation seconds per day ------------------------------------------------------------------


def test_evaluation_seconds_used_today_block_new_submissions_until_midnight_utc(
    api, user, ready, cpu_hardware, settings
):
    settings.QUOTA_GPU_SECONDS_PER_DAY = 100
    evaluated(stored(user, ready, cpu_hardware), phases={"wall": 60.5, "total": 58.0})
    assert post(api).status_code == 202
    evaluated(Submission.objects.filter(status="queued").get(), phases={"wall": 40.0})
    response = post(api)
    assert response.status_code == 429
    body = response.json()
    assert body["code"] == "quota_gpu_seconds"
    assert "used 100 of your 100 evaluation seconds today" in body["detail"]
    assert "resets at 00:00 UTC" in body["detail"]
    until_midnight = (day_start() + timedelta(days=1) - timezone.now()).total_seconds()
    assert abs(int(response["Retry-After"]) - until_midnight) <= 5


def test_evaluations_without_a_wall_time_count_from_start_to_finish(
    user, ready, cpu_hardware
):
    now = timezone.now()
    submission = stored(user, ready, cpu_hardware)
    evaluated(submission, started_at=now - timedelta(seconds=30), finished_at=now)
    other = stored(user, ready, cpu_hardware)
    evaluated(other, phases={"wall": 12.0})
    assert quota_usage(user=user).gpu_seconds == pytest.approx(42.0, abs=0.01)


def test_the_wait_for_device_memory_behind_other_evaluations_is_not_charged(
    user, ready, cpu_hardware
):
    evaluated(stored(user, ready, cpu_hardware), phases={"wall": 400.0, "admission_wait": 350.0})
    evaluated(stored(user, ready, cpu_hardware), phases={"wall": 12.0})
    assert quota_usage(user=user).gpu_seconds == pytest.approx(62.0)


def test_only_todays_evaluations_of_the_users_own_submissions_count(
    user, ready, cpu_hardware
):
    yesterday = day_start() - timedelta(hours=1)
    evaluated(stored(user, ready, cpu_hardware), phases={"wall": 500.0}, finished_at=yesterday)
    stranger = get_user_model().objects.create_user("bea", password="b-long-passphrase-2")
    evaluated(stored(stranger, ready, cpu_hardware), phases={"wall": 700.0})
    evaluated(stored(user, ready, cpu_hardware), phases={"wall": 3.0})
    # An admin's re-verification of the user's kernel is not the user's spending.
    Evaluation.objects.create(
        submission=Submission.objects.filter(user=user).first(),
        attempt=9,
        purpose=Evaluation.Purpose.REVERIFY,
        hardware=cpu_hardware,
        problem_version_id=ready.current_version_id,
        verdict="correct",
        source_hash="x",
        phases={"wall": 900.0},
    )
    assert quota_usage(user=user).gpu_seconds == pytest.approx(3.0)


# ---- who is exempt, and turning quotas off ------------------------------------------------------


def test_staff_are_exempt_from_both_quotas(ready, cpu_hardware, settings):
    settings.QUOTA_MAX_QUEUED = 1
    settings.QUOTA_GPU_SECONDS_PER_DAY = 1
    admin = get_user_model().objects.create_user("root", password="r-long-pass-9", is_staff=True)
    evaluated(stored(admin, ready, cpu_hardware), phases={"wall": 50.0})
    api = SchemaCheckedClient().with_token(token_for(admin))
    assert [post(api).status_code for _ in range(3)] == [202, 202, 202]
    assert quota_usage(user=admin).exempt


def test_a_zero_limit_turns_a_quota_off(api, ready, settings):
    settings.QUOTA_MAX_QUEUED = 0
    settings.QUOTA_GPU_SECONDS_PER_DAY = 0
    assert [post(api).status_code for _ in range(4)] == [202] * 4


# ---- where the limits are shown ------------------------------------------------------------------


def test_the_web_form_shows_the_quota_error_and_stores_nothing(
    client, user, ready, cpu_hardware, settings
):
    settings.QUOTA_MAX_QUEUED = 1
    stored(user, ready, cpu_hardware)
    client.force_login(user)
    response = client.post(
        "/submissions/new/",
        {"problem": ready.pk, "backend": "torch", "hardware": "cpu", "precision": "fp32",
         "source": RELU},
    )
    assert response.status_code == 429
    page = response.content.decode()
    assert "You have 1 submissions waiting or running; the limit is 1 at once" in page
    assert 'id="quota-summary"' in page
    assert Submission.objects.count() == 1


def test_the_profile_page_shows_the_limits_and_the_current_usage(
    client, user, ready, cpu_hardware, settings
):
    settings.QUOTA_MAX_QUEUED = 7
    settings.QUOTA_GPU_SECONDS_PER_DAY = 900
    stored(user, ready, cpu_hardware)
    evaluated(stored(user, ready, cpu_hardware), phases={"wall": 125.4})
    client.force_login(user)
    page = client.get("/accounts/profile/").content.decode()
    queued_row = page.split('id="quota-queued"')[1].split("</tr>")[0]
    seconds_row = page.split('id="quota-gpu-seconds"')[1].split("</tr>")[0]
    assert "<td>1</td>" in queued_row and "<td>7</td>" in queued_row
    assert "<td>125</td>" in seconds_row and "900" in seconds_row and "UTC" in seconds_row


def test_the_quota_endpoint_tells_an_agent_what_it_has_left(api, user, ready, cpu_hardware,
                                                           settings):
    settings.QUOTA_MAX_QUEUED = 5
    settings.QUOTA_GPU_SECONDS_PER_DAY = 60
    evaluated(stored(user, ready, cpu_hardware), phases={"wall": 20.0})
    stored(user, ready, cpu_hardware)  # reserved at the 20 s its problem took
    body = api.get("/api/v1/quota/").json()
    assert body["exempt"] is False
    assert (body["queued"], body["max_queued"], body["queued_left"]) == (1, 5, 4)
    assert body["gpu_seconds"] == pytest.approx(20.0)
    assert body["gpu_seconds_reserved"] == pytest.approx(20.0)
    assert body["gpu_seconds_left"] == pytest.approx(20.0)


def test_the_quota_endpoint_needs_a_login(db):
    assert SchemaCheckedClient().get("/api/v1/quota/").status_code == 401


# ---- the budget counts what is committed (issue 63) ----------------------------------------------


def test_waiting_work_is_reserved_and_a_request_that_would_pass_the_budget_gets_the_figures(
    api, user, ready, cpu_hardware, settings
):
    """A first evaluation of 30 s sets the estimate; two queued reserve 60 more; the third
    would pass 100 and is refused with the budget, used, reserved and when it frees."""
    settings.QUOTA_GPU_SECONDS_PER_DAY = 100
    evaluated(stored(user, ready, cpu_hardware), phases={"wall": 30.0})
    assert [post(api).status_code for _ in range(2)] == [202, 202]
    response = post(api)
    assert response.status_code == 429
    body = response.json()
    assert body["code"] == "quota_gpu_seconds"
    assert body["quota"]["budget"] == 100
    assert (body["quota"]["used"], body["quota"]["reserved"], body["quota"]["needed"],
            body["quota"]["waiting"]) == (30.0, 60.0, 30.0, 2)
    assert "used 30 of your 100 evaluation seconds today and 60 more are reserved" in body[
        "detail"]
    assert "frees as your waiting work finishes, in about 20 s" in body["detail"]
    assert body["retry_after"] == int(response["Retry-After"]) == 20
    assert Submission.objects.count() == 3

    # Corrected when it finishes: a queued one took 5 s, not its 30 s estimate.
    evaluated(Submission.objects.filter(status="queued").first(), phases={"wall": 5.0})
    assert quota_usage(user=user).gpu_seconds_reserved == pytest.approx(30.0)
    assert post(api).status_code == 202  # 35 used + 30 reserved + 30 needed


def test_the_estimate_is_the_90th_percentile_of_recent_evaluations_else_the_time_limit(
    user, ready, cpu_hardware, settings
):
    from submissions.quotas import Work, evaluation_estimate

    work = Work(ready.pk, cpu_hardware.pk, True)
    assert evaluation_estimate(work) == settings.EVALUATION_TIME_LIMIT
    for wall in (10, 20, 30, 40, 50, 60, 70, 80, 90, 400):
        evaluated(stored(user, ready, cpu_hardware), phases={"wall": float(wall)})
    assert evaluation_estimate(work) == 90.0
    # An untimed test run is estimated from untimed ones (none yet: the time limit).
    assert evaluation_estimate(Work(ready.pk, cpu_hardware.pk, False)) == (
        settings.EVALUATION_TIME_LIMIT)


def test_a_batch_or_test_runs_that_would_pass_the_budget_are_refused_whole(
    api, user, ready, cpu_hardware, settings
):
    settings.QUOTA_GPU_SECONDS_PER_DAY = 100
    evaluated(stored(user, ready, cpu_hardware), phases={"wall": 30.0})
    items = [{"level": 1, "number": 901, "backend": "torch", "hardware": "cpu",
              "source": RELU}] * 3
    response = api.post("/api/v1/submissions/batch/", {"submissions": items}, format="json")
    assert response.status_code == 429
    assert response.json()["quota"]["needed"] == 90.0
    assert Submission.objects.count() == 1
    # An untimed test run of a problem never tested so: at the time limit.
    settings.QUOTA_GPU_SECONDS_PER_DAY = 30 + 30 + settings.EVALUATION_TIME_LIMIT - 1
    assert post(api).status_code == 202
    test_run = api.post("/api/v1/submissions/", payload(test_run=True), format="json")
    assert test_run.status_code == 429, test_run.json()
    assert test_run.json()["quota"]["needed"] == settings.EVALUATION_TIME_LIMIT


def test_one_evaluation_at_a_time_goes_while_budget_is_left(api, user, ready, settings):
    """A budget below one evaluation's estimate (300 s, never evaluated) still lets work
    through, one at a time."""
    settings.QUOTA_GPU_SECONDS_PER_DAY = 100
    assert post(api).status_code == 202
    assert post(api).status_code == 429


def test_the_web_form_says_the_same_figures(client, user, ready, cpu_hardware, settings):
    settings.QUOTA_GPU_SECONDS_PER_DAY = 100
    evaluated(stored(user, ready, cpu_hardware), phases={"wall": 30.0})
    stored(user, ready, cpu_hardware)
    stored(user, ready, cpu_hardware)
    client.force_login(user)
    response = client.post(
        "/submissions/new/",
        {"problem": ready.pk, "backend": "torch", "hardware": "cpu", "precision": "fp32",
         "source": RELU},
    )
    assert response.status_code == 429
    assert ("used 30 of your 100 evaluation seconds today and 60 more are reserved by the 2 "
            "waiting or running") in response.content.decode()
