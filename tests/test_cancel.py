"""Cancel (issue 63): an owner cancels a queued or running submission, or a whole batch, from its
page, the API and `kb`; the reservation goes, time run is charged; a running one is stopped
through its lease; a record's re-verification is not the owner's to cancel; an operator disables
an account, which cancels its work. The runner's services run here with the stand-in harness;
tests/test_cancel_runner.py stops a real runner's evaluation, tests/test_cli_cancel.py has `kb`."""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from gpu_runner import services as runner_services
from gpu_runner.services import run_next
from submissions.cancellations import CancelError, account_disable, submission_cancel
from submissions.models import Batch, Evaluation, Reverification, Submission
from submissions.quotas import quota_usage
from submissions.reverifications import reverification_request
from submissions.services import submission_create
from tests.api_support import SchemaCheckedClient, token_for
from tests.conftest import kernel_source

RELU = kernel_source("relu_correct.py")


@pytest.fixture
def bob(db):
    return get_user_model().objects.create_user("bob", password="a-long-passphrase-2")


def queued(user, problem, hardware, **extra) -> Submission:
    return submission_create(user=user, problem=problem, source=RELU, backend="torch",
                             hardware=hardware, **extra)


def claimed(submission: Submission, runner: str = "runner:1") -> Submission:
    assert submission.claim(runner_name=runner, lease_seconds=60)
    return submission


def batch_items(n: int) -> list[dict]:
    return [{"problem": "level1/901_Small_ReLU", "backend": "torch", "source": RELU + f"# {i}\n"}
            for i in range(n)]


# ---- the API ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_owner_cancels_a_queued_submission_through_the_api_and_it_says_cancelled(
    user, cpu_hardware, relu_problem
):
    submission = queued(user, relu_problem, cpu_hardware)
    api = SchemaCheckedClient().with_token(token_for(user))
    response = api.post(f"/api/v1/submissions/{submission.pk}/cancel/")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "cancelled" and body["settled"] is True
    assert body["ranking"]["detail"] == "cancelled" and body["ranking"]["state"] == "off_board"
    submission.refresh_from_db()
    assert submission.status == "cancelled" and submission.cancelled_by == user
    assert submission.charged_seconds is None  # it never ran
    # Listed and filtered as cancelled.
    listed = api.get("/api/v1/submissions/?status=cancelled").json()["results"]
    assert [row["id"] for row in listed] == [submission.pk]


@pytest.mark.django_db
def test_a_finished_or_cancelled_submission_answers_409_and_someone_elses_403_or_404(
    user, bob, cpu_hardware, relu_problem
):
    mine = queued(user, relu_problem, cpu_hardware)
    api = SchemaCheckedClient().with_token(token_for(user))
    assert api.post(f"/api/v1/submissions/{mine.pk}/cancel/").status_code == 200
    again = api.post(f"/api/v1/submissions/{mine.pk}/cancel/")
    assert again.status_code == 409 and again.json()["code"] == "already_ended"

    finished = queued(user, relu_problem, cpu_hardware, filename="b.py")
    finished.mark_finished(verdict="correct")
    refused = api.post(f"/api/v1/submissions/{finished.pk}/cancel/")
    assert refused.status_code == 409 and refused.json()["code"] == "already_ended"

    other = SchemaCheckedClient().with_token(token_for(bob))
    theirs = queued(user, relu_problem, cpu_hardware, filename="c.py")
    forbidden = other.post(f"/api/v1/submissions/{theirs.pk}/cancel/")
    assert forbidden.status_code == 403 and forbidden.json()["code"] == "forbidden"
    relu_problem.status = relu_problem.Status.DRAFT  # a problem bob cannot see
    relu_problem.save(update_fields=["status"])
    assert other.post(f"/api/v1/submissions/{theirs.pk}/cancel/").status_code == 404
    assert Submission.objects.get(pk=theirs.pk).status == "queued"


@pytest.mark.django_db
def test_a_read_only_token_cannot_cancel(user, cpu_hardware, relu_problem):
    submission = queued(user, relu_problem, cpu_hardware)
    reader = SchemaCheckedClient().with_token(token_for(user, scopes=("read",)))
    assert reader.post(f"/api/v1/submissions/{submission.pk}/cancel/").status_code == 403
    assert Submission.objects.get(pk=submission.pk).status == "queued"


# ---- quotas -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_cancelling_releases_the_reservation_and_a_running_one_is_charged_the_time_it_ran(
    user, cpu_hardware, relu_problem, settings
):
    settings.EVALUATION_TIME_LIMIT = 100  # each reserved at the time limit: nothing timed yet
    waiting = queued(user, relu_problem, cpu_hardware)
    running = claimed(queued(user, relu_problem, cpu_hardware, filename="b.py"))
    Submission.objects.filter(pk=running.pk).update(
        started_at=timezone.now() - timedelta(seconds=30))
    before = quota_usage(user=user)
    assert before.gpu_seconds_reserved == 200 and before.gpu_seconds == 0

    submission_cancel(submission=waiting, user=user)
    submission_cancel(submission=Submission.objects.get(pk=running.pk), user=user)
    after = quota_usage(user=user)
    assert after.gpu_seconds_reserved == 0 and after.queued == 0
    assert 30 <= after.gpu_seconds < 35  # the running one's 30 s, charged; the queued one's 0
    assert Submission.objects.get(pk=waiting.pk).charged_seconds is None


# ---- the runner ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_claim_never_takes_a_cancelled_submission(user, cpu_hardware, relu_problem, harness):
    submission = queued(user, relu_problem, cpu_hardware)
    submission_cancel(submission=submission, user=user)
    assert not submission.claim(runner_name="runner:1", lease_seconds=60)
    assert run_next(hardware_id=cpu_hardware.pk, runner_name="runner:1") == "not claimed"
    assert harness.jobs == []
    # Not even as a lapsed lease (a cancelled row keeps no lease to lapse).
    Submission.objects.filter(pk=submission.pk).update(
        lease_expires_at=timezone.now() - timedelta(minutes=5))
    assert not submission.claim(runner_name="runner:2", lease_seconds=60)


@pytest.mark.django_db(transaction=True)
def test_a_running_submission_is_stopped_at_the_next_heartbeat_and_stays_cancelled(
    user, cpu_hardware, relu_problem, settings, monkeypatch
):
    """The runner's services for real (claim, lease heartbeat, store) around a stand-in harness
    that runs until it is asked to stop; the heartbeat thread sees the cancel and asks it (the
    sandbox's side, a real process tree killed on the request: test_cancel_runner.py and
    tests/harness/test_sandbox_stop.py)."""
    settings.RUNNER_LEASE_SECONDS = 3  # a beat every 0.5 s
    submission = queued(user, relu_problem, cpu_hardware)
    asked = []

    def run_job(job, on_event=None, stop=None):
        # The owner cancels while it runs; the judge then runs until the runner stops it.
        submission_cancel(submission=Submission.objects.get(pk=submission.pk), user=user)
        assert stop is not None and stop.wait(timeout=5), "the heartbeat did not ask it to stop"
        asked.append(threading.get_native_id())
        return {"verdict": "harness_error", "correct": False,
                "error": "stopped by its runner before it ended (its submission was cancelled)"}

    monkeypatch.setattr(runner_services.sandbox, "run_job", run_job)
    outcome = run_next(hardware_id=cpu_hardware.pk, runner_name="runner:1")

    assert outcome == "cancelled"
    assert asked == [threading.get_native_id()]  # the thread that ran the job
    submission.refresh_from_db()
    assert submission.status == "cancelled" and submission.verdict == ""
    assert not Evaluation.objects.filter(submission=submission).exists()
    assert submission.progress == {"phase": "cancelled"}


@pytest.mark.django_db
def test_a_cancel_between_the_claim_and_the_start_runs_nothing(
    user, cpu_hardware, relu_problem, harness
):
    submission = claimed(queued(user, relu_problem, cpu_hardware))
    submission_cancel(submission=submission, user=user)
    assert runner_services._evaluate_claimed(submission, runner_name="runner:1") == "cancelled"
    assert harness.jobs == []


# ---- batches ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_batch_has_an_id_and_a_status_and_cancelling_it_cancels_what_waits_or_runs(
    user, bob, cpu_hardware, relu_problem
):
    api = SchemaCheckedClient().with_token(token_for(user))
    made = api.post("/api/v1/submissions/batch/", {"submissions": batch_items(3)}, format="json")
    assert made.status_code == 202, made.json()
    batch_id = made.json()["batch"]
    ids = [row["id"] for row in made.json()["submissions"]]
    assert set(Submission.objects.filter(batch_id=batch_id).values_list("pk", flat=True)) == set(
        ids)
    shown = api.get(f"/api/v1/batches/{batch_id}/").json()
    assert shown["status"] == "queued" and shown["counts"]["queued"] == 3
    assert [row["id"] for row in shown["submissions"]] == ids

    Submission.objects.get(pk=ids[0]).mark_finished(verdict="correct")
    claimed(Submission.objects.get(pk=ids[1]))
    assert api.get(f"/api/v1/batches/{batch_id}/").json()["status"] == "running"
    assert SchemaCheckedClient().with_token(token_for(bob)).post(
        f"/api/v1/batches/{batch_id}/cancel/").status_code == 404  # not bob's

    cancelled = api.post(f"/api/v1/batches/{batch_id}/cancel/")
    assert cancelled.status_code == 200, cancelled.json()
    body = cancelled.json()
    assert body["status"] == "cancelled"
    assert body["counts"] == {"queued": 0, "running": 0, "finished": 1, "cancelled": 2}
    statuses = dict(Submission.objects.filter(pk__in=ids).values_list("pk", "status"))
    assert statuses == {ids[0]: "finished", ids[1]: "cancelled", ids[2]: "cancelled"}
    again = api.post(f"/api/v1/batches/{batch_id}/cancel/")
    assert again.status_code == 409 and again.json()["code"] == "already_ended"


@pytest.mark.django_db
def test_a_retried_batch_answers_the_first_ones_batch(user, cpu_hardware, relu_problem):
    api = SchemaCheckedClient().with_token(token_for(user))
    body = {"submissions": batch_items(2)}
    first = api.post("/api/v1/submissions/batch/", body, format="json", HTTP_IDEMPOTENCY_KEY="k")
    retry = api.post("/api/v1/submissions/batch/", body, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert first.json()["batch"] == retry.json()["batch"]
    assert Batch.objects.count() == 1


# ---- re-verification ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_records_reverification_cannot_be_cancelled_by_its_owner(
    user, cpu_hardware, relu_problem
):
    submission = queued(user, relu_problem, cpu_hardware)
    Evaluation.objects.create(
        submission=submission, hardware=cpu_hardware, problem_version=submission.problem_version,
        verdict="correct", correct=True, candidate_median_ms=1.0, source_hash="x",
        runner_name="runner:1")
    submission.mark_finished(verdict="correct")
    reverification_request(submission=submission, reason=Reverification.Reason.NEW_RECORD)

    api = SchemaCheckedClient().with_token(token_for(user))
    refused = api.post(f"/api/v1/submissions/{submission.pk}/cancel/")
    assert refused.status_code == 409 and refused.json()["code"] == "reverifying"
    assert submission.reverifications.get().status == Reverification.Status.QUEUED
    with pytest.raises(CancelError):
        submission_cancel(submission=submission, user=user)


# ---- the page -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_page_shows_a_cancel_button_to_the_owner_and_its_post_cancels(
    user, bob, cpu_hardware, relu_problem
):
    submission = queued(user, relu_problem, cpu_hardware)
    page = Client(enforce_csrf_checks=True)
    page.force_login(user)
    html = page.get(submission.get_absolute_url()).content.decode()
    assert 'id="cancel-form"' in html
    token = page.cookies["csrftoken"].value
    # Without the CSRF token the POST is refused.
    assert page.post(f"/submissions/{submission.pk}/cancel/").status_code == 403
    other = Client()
    other.force_login(bob)
    assert 'id="cancel-form"' not in other.get(submission.get_absolute_url()).content.decode()
    assert other.post(f"/submissions/{submission.pk}/cancel/").status_code == 403
    assert Submission.objects.get(pk=submission.pk).status == "queued"

    response = page.post(f"/submissions/{submission.pk}/cancel/", HTTP_X_CSRFTOKEN=token,
                         follow=True)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-status="cancelled"' in html and 'id="cancelled-note"' in html
    assert 'id="cancel-form"' not in html
    assert Submission.objects.get(pk=submission.pk).status == "cancelled"
    listed = page.get("/submissions/?status=cancelled").content.decode()
    assert f"/submissions/{submission.pk}/" in listed


# ---- disabled accounts --------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_disabled_account_cannot_log_in_nor_use_its_token_and_its_work_is_cancelled(
    user, cpu_hardware, relu_problem, admin_user
):
    key = token_for(user)
    waiting = queued(user, relu_problem, cpu_hardware)
    running = claimed(queued(user, relu_problem, cpu_hardware, filename="b.py"))
    done = queued(user, relu_problem, cpu_hardware, filename="c.py")
    done.mark_finished(verdict="correct")

    assert account_disable(user=user, by=admin_user) == 2
    statuses = dict(Submission.objects.values_list("pk", "status"))
    assert statuses == {waiting.pk: "cancelled", running.pk: "cancelled", done.pk: "finished"}
    assert Submission.objects.get(pk=running.pk).cancelled_by == admin_user
    browser = Client()
    page = browser.post("/accounts/login/", {"username": "ada",
                                             "password": "a-long-passphrase-1"})
    assert page.status_code == 200  # the login page again, not the redirect of a login
    assert "_auth_user_id" not in browser.session
    refused = SchemaCheckedClient().with_token(key).get("/api/v1/submissions/")
    assert refused.status_code == 401


@pytest.mark.django_db
def test_the_admin_action_disables_an_account_and_cancels_its_queued_work(
    user, cpu_hardware, relu_problem, admin_client
):
    submission = queued(user, relu_problem, cpu_hardware)
    response = admin_client.post("/admin/auth/user/", {
        "action": "disable_accounts", "_selected_action": [user.pk]}, follow=True)
    assert response.status_code == 200
    user.refresh_from_db()
    assert not user.is_active
    assert Submission.objects.get(pk=submission.pk).status == "cancelled"
