"""Test runs (KernelBot's `test` mode): a kernel checked for correctness on the site's hardware,
timed only when asked, and never ranked: no board, record, re-verification or count. From the
submit page, the API (`test_run`, `timing`) and `kb test`.

In this process: the web form and the API store and queue, the runner's own services evaluate
with the stand-in harness (FakeHarness), and the boards are read back. The last test runs `kb
test` against the real server and a real runner with the real harness (slow tier), the one
place the judge's correctness-only path runs for real.
"""

import pytest
from django.test import Client

from leaderboard.models import BestEntry, Record
from leaderboard.services import boards_rebuild
from submissions.models import Reverification, Submission
from submissions.reverifications import ReverificationError, reverification_request
from tests.api_support import SchemaCheckedClient, token_for
from tests.conftest import KERNELS, kernel_source
from tests.leaderboard_factory import make_result
from tests.test_flow_in_process import run_queued_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(user):
    return SchemaCheckedClient().with_token(token_for(user))


def submit(api, problem, **extra) -> Submission:
    response = api.post("/api/v1/submissions/", {
        "problem": problem.slug, "backend": "torch",
        "source": kernel_source("relu_correct.py"), **extra}, format="json")
    assert response.status_code == 202, response.content
    return Submission.objects.get(pk=response.json()["id"])


def evaluate_queued(harness, *answers: dict) -> list[str]:
    for answer in answers:
        harness.will_return(**answer)
    return run_queued_tasks()


def test_a_test_run_is_checked_for_correctness_only_and_stays_off_the_board(
    api, harness, relu_problem, cpu_hardware, settings, django_capture_on_commit_callbacks
):
    settings.REVERIFY_NEW_RECORDS = True  # a ranked first result would be held for this
    with django_capture_on_commit_callbacks(execute=True):
        test_run = submit(api, relu_problem, test_run=True)
    assert (test_run.test_run, test_run.timed) == (True, False)
    assert evaluate_queued(harness, {"ms": 1.0}) == ["correct"]
    # The judge is asked for the correctness trials only.
    assert harness.jobs[0]["measure"] is False

    test_run.refresh_from_db()
    assert test_run.verdict == "correct" and test_run.is_settled
    assert not BestEntry.objects.exists() and not Record.objects.exists()
    assert not Reverification.objects.exists()  # never a would-be record
    body = api.get(f"/api/v1/submissions/{test_run.pk}/").json()
    assert (body["test_run"], body["timed"], body["settled"]) == (True, False, True)
    assert body["ranking"]["state"] == "off_board"
    assert body["ranking"]["detail"] == "test_run"


def test_a_timed_test_run_shows_its_speed_and_never_outranks_a_ranked_kernel(
    api, harness, relu_problem, cpu_hardware, settings, django_capture_on_commit_callbacks
):
    settings.REVERIFY_NEW_RECORDS = False
    with django_capture_on_commit_callbacks(execute=True):
        timed = submit(api, relu_problem, test_run=True, timing=True)
        ranked = submit(api, relu_problem)
    # The test run is ten times faster than the ranked kernel, and still not on the board.
    assert evaluate_queued(harness, {"ms": 0.1}, {"ms": 1.0}) == ["correct", "correct"]
    assert [job["measure"] for job in harness.jobs] == [True, True]

    entry = BestEntry.objects.get()
    assert (entry.submission_id, entry.rank) == (ranked.pk, 1)
    body = api.get(f"/api/v1/submissions/{timed.pk}/").json()
    assert body["candidate_ms"] == pytest.approx(0.1) and body["speedup"] is not None
    assert body["ranking"]["detail"] == "test_run"
    assert api.get(f"/api/v1/submissions/{ranked.pk}/").json()["ranking"]["rank"] == 1
    listed = api.get("/api/v1/submissions/", {"test_run": "true"}).json()["results"]
    assert [item["id"] for item in listed] == [timed.pk]


def test_a_flagged_test_run_is_not_listed_on_the_board_even_after_a_rebuild(
    user, relu_problem, cpu_hardware
):
    cheat = make_result(problem=relu_problem, hardware=cpu_hardware, user=user,
                        flags=("result_caching",), refresh=False)
    Submission.objects.filter(pk=cheat.submission_id).update(test_run=True)
    honest = make_result(problem=relu_problem, hardware=cpu_hardware, user=user, ms=2.0)
    boards_rebuild()
    entry = BestEntry.objects.get()
    assert entry.submission_id == honest.submission_id
    assert entry.flagged_evaluation_id is None and entry.evaluated == 1


def test_a_test_run_cannot_be_re_verified(user, relu_problem, cpu_hardware):
    evaluation = make_result(problem=relu_problem, hardware=cpu_hardware, user=user,
                             refresh=False)
    submission = evaluation.submission
    Submission.objects.filter(pk=submission.pk).update(test_run=True)
    submission.refresh_from_db()
    with pytest.raises(ReverificationError) as raised:
        reverification_request(submission=submission, reason=Reverification.Reason.OWNER)
    assert raised.value.code == "test_run"


def test_the_api_refuses_an_untimed_ranked_submission_and_a_test_run_in_a_model_run(
    api, relu_problem, cpu_hardware
):
    untimed = api.post("/api/v1/submissions/", {
        "problem": relu_problem.slug, "backend": "torch",
        "source": kernel_source("relu_correct.py"), "timing": False}, format="json")
    assert untimed.status_code == 400
    assert "always timed" in untimed.json()["detail"]
    batch = api.post("/api/v1/submissions/batch/", {"submissions": [
        {"problem": relu_problem.slug, "backend": "torch",
         "source": kernel_source("relu_correct.py"), "test_run": True},
        {"problem": relu_problem.slug, "backend": "torch",
         "source": kernel_source("relu_correct.py"), "test_run": True, "run": 12345},
    ]}, format="json")
    assert batch.status_code == 400  # the unknown run: nothing of the batch stored
    assert not Submission.objects.exists()


def test_the_submit_page_makes_a_test_run_and_its_page_says_it_is_one(
    user, relu_problem, cpu_hardware, django_capture_on_commit_callbacks
):
    client = Client()
    client.force_login(user)
    page = client.get("/submissions/new/")
    assert 'value="test_timed"' in page.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/submissions/new/", {
            "problem": relu_problem.pk, "backend": "torch", "hardware": "cpu",
            "precision": "fp32", "source": kernel_source("relu_correct.py"),
            "purpose": "test"})
    assert response.status_code == 302, response.content.decode()[:2000]
    submission = Submission.objects.get()
    assert (submission.test_run, submission.timed) == (True, False)
    detail = client.get(submission.get_absolute_url()).content.decode()
    assert 'id="test-run-note"' in detail and "never ranked" in detail
    listing = client.get("/submissions/").content.decode()
    assert ">test</span>" in listing


@pytest.mark.django_db(transaction=True)
def test_kb_test_runs_the_real_harness_for_correctness_and_never_ranks(
    tmp_path, live_site, start_runner, user, relu_problem, cpu_hardware
):
    """Slow: kb, the server and a runner with the real sandboxed judge, each a real process:
    the judge's correctness-only path (no timing) gives the verdict, and nothing ranks."""
    from tests.test_cli import kb

    assert kb("login", "--url", live_site, "--token", token_for(user),
              home=tmp_path).returncode == 0
    start_runner(REVERIFY_NEW_RECORDS="1")
    right = kb("test", str(KERNELS / "relu_correct.py"), "--problem", relu_problem.slug,
               "--backend", "torch", home=tmp_path, timeout=300)
    assert right.returncode == 0, right.stdout + right.stderr
    wrong = kb("test", str(KERNELS / "relu_wrong.py"), "--problem", relu_problem.slug,
               "--backend", "torch", home=tmp_path, timeout=300)
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr

    first, second = Submission.objects.order_by("pk")
    assert (first.verdict, second.verdict) == ("correct", "incorrect")
    assert first.test_run and not first.timed
    assert f"Test run {first.pk}: correct" in right.stdout
    assert "not ranked, a test run" in right.stdout or "a test run" in right.stdout
    evaluation = first.latest_evaluation
    assert evaluation.candidate_median_ms is None  # the judge timed nothing
    assert len(evaluation.trials) == 5
    assert not BestEntry.objects.exists() and not Reverification.objects.exists()
    listed = kb("list", home=tmp_path)
    assert f"{first.pk} (test)" in listed.stdout
