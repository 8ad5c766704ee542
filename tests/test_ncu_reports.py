"""Nsight Compute on request: asked for by the owner (page or API), quota'd, queued to the
submission's hardware, made by a real runner; a runner without ncu (here: the CPU runner)
finishes it as unavailable with the reason."""

import pytest
from django.contrib.auth import get_user_model
from django.utils.module_loading import import_string

from evaluation.services import hardware_register
from evaluator.runner import ncu
from problems.models import Problem
from submissions.models import NcuReport
from tests.api_support import SchemaCheckedClient, token_for
from tests.conftest import take_queued_tasks
from tests.leaderboard_factory import make_result

pytestmark = pytest.mark.django_db(transaction=True)

# ncu --import report.ncu-rep --csv --page raw --print-units base, cut to three metrics.
RAW_CSV = (
    '"ID","Process ID","Kernel Name","gpu__time_duration.sum",'
    '"sm__throughput.avg.pct_of_peak_sustained_elapsed","dram__bytes_read.sum",'
    '"dram__bytes_write.sum","smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",'
    '"smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",'
    '"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_selected_per_issue_active.ratio"\n'
    '"","","","nsecond","%","byte","byte","inst","inst","ratio","ratio"\n'
    '"0","14","new_gelu_kernel","125,952","38.0","256000000","257000000","400","100",'
    '"27.57","1.0"\n'
)


@pytest.fixture
def finished(cpu_hardware, relu_problem, user):
    return make_result(problem=relu_problem, hardware=cpu_hardware, user=user).submission


def api_for(user) -> SchemaCheckedClient:
    return SchemaCheckedClient().with_token(token_for(user))


def test_a_report_asked_for_through_the_api_ends_unavailable_on_a_runner_without_ncu(
    finished, user, monkeypatch
):
    api = api_for(user)
    answer = api.post(f"/api/v1/submissions/{finished.pk}/ncu/")
    assert answer.status_code == 202, answer.content
    report_id = answer.json()["id"]
    assert answer.json()["status"] == "queued" and answer.json()["report_url"] is None
    again = api.post(f"/api/v1/submissions/{finished.pk}/ncu/")
    assert again.status_code == 409 and again.json()["code"] == "already_open"

    # A CPU runner's worker takes the report's task (in this process) and answers for its host.
    monkeypatch.setenv("KBSITE_RUNNER_NAME", "worker:1")
    tasks = [t for t in take_queued_tasks("cpu") if t["func"] == "gpu_runner.tasks.ncu_report"]
    assert [task["args"] for task in tasks] == [(report_id,)]
    import_string(tasks[0]["func"])(*tasks[0]["args"])
    assert NcuReport.objects.get(pk=report_id).status not in NcuReport.OPEN
    report = api.get(f"/api/v1/submissions/{finished.pk}/ncu/{report_id}/").json()
    assert report["status"] == "unavailable"
    assert "this runner serves a CPU" in report["message"]
    listed = api.get(f"/api/v1/submissions/{finished.pk}/ncu/").json()
    assert [r["id"] for r in listed] == [report_id]


def test_only_the_owner_and_staff_may_ask_and_who_may_see_the_source_may_see(finished, user):
    bob = get_user_model().objects.create_user("bob", password="a-long-passphrase-1")
    assert api_for(bob).post(f"/api/v1/submissions/{finished.pk}/ncu/").status_code == 404
    # The problem's code is public: so are the reports of its kernels (selectors.can_see_source).
    assert api_for(bob).get(f"/api/v1/submissions/{finished.pk}/ncu/").status_code == 200
    Problem.objects.filter(pk=finished.problem_id).update(
        code_visibility=Problem.CodeVisibility.OWNER
    )
    assert api_for(bob).get(f"/api/v1/submissions/{finished.pk}/ncu/").status_code == 404
    staff = get_user_model().objects.create_user("root", password="x", is_staff=True)
    assert api_for(staff).post(f"/api/v1/submissions/{finished.pk}/ncu/").status_code == 202


def test_the_daily_quota_answers_429(finished, user, settings):
    settings.QUOTA_NCU_REPORTS_PER_DAY = 1
    api = api_for(user)
    first = api.post(f"/api/v1/submissions/{finished.pk}/ncu/")
    assert first.status_code == 202
    NcuReport.objects.filter(pk=first.json()["id"]).update(status=NcuReport.Status.DONE)
    over = api.post(f"/api/v1/submissions/{finished.pk}/ncu/")
    assert over.status_code == 429 and over.json()["code"] == "quota_ncu_reports"
    assert int(over["Retry-After"]) > 0


def test_the_page_asks_shows_the_result_and_serves_the_file_to_its_owner(
    client, relu_problem, user
):
    # On a GPU: a CPU submission's page offers no Nsight Compute (test_submission_page_states).
    gpu = hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")
    finished = make_result(problem=relu_problem, hardware=gpu, user=user).submission
    client.force_login(user)
    page = client.post(f"/submissions/{finished.pk}/ncu/", follow=True).content.decode()
    assert "Nsight Compute report queued" in page and "Report in progress" in page
    report = NcuReport.objects.get(submission=finished)
    NcuReport.objects.filter(pk=report.pk).update(
        status=NcuReport.Status.DONE, kernels=ncu.parse_raw_csv(RAW_CSV),
        text="new_gelu_kernel (4096, 1, 1)x(256, 1, 1)", report=b"NCU-REP", report_size=7,
        seconds=8.7)
    part = client.get(f"/submissions/{finished.pk}/ncu/").content.decode()
    assert "new_gelu_kernel" in part and "38.0%" in part and "long scoreboard 27.57" in part
    assert "ncu took 8.7 s" in part and "download .ncu-rep" in part
    download = client.get(f"/submissions/{finished.pk}/ncu/{report.pk}.ncu-rep")
    assert download.status_code == 200 and download.content == b"NCU-REP"
    client.force_login(get_user_model().objects.create_user("bob", password="x-long-pass-1"))
    others = client.get(f"/submissions/{finished.pk}/ncu/").content.decode()
    assert "new_gelu_kernel" in others and "Profile with Nsight Compute" not in others
    Problem.objects.filter(pk=finished.problem_id).update(
        code_visibility=Problem.CodeVisibility.OWNER
    )  # a private problem's kernels: their reports stay with the owner
    assert client.get(f"/submissions/{finished.pk}/ncu/{report.pk}.ncu-rep").status_code == 403
    assert client.get(f"/submissions/{finished.pk}/ncu/").status_code == 403


def test_ncus_raw_page_becomes_the_small_metric_set():
    (kernel,) = ncu.parse_raw_csv(RAW_CSV)
    assert kernel["name"] == "new_gelu_kernel" and kernel["duration_ns"] == 125952
    assert kernel["compute_pct"] == 38.0 and kernel["dram_bytes"] == 513_000_000
    assert kernel["flops"] == 2 * 400 + 100  # an FMA is two operations
    assert kernel["stalls"] == [["long_scoreboard", 27.57]]  # "selected" is no stall


def test_a_gpu_runner_without_ncu_says_so(monkeypatch, tmp_path):
    monkeypatch.delenv(ncu.NCU_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    outcome = ncu.run_report({"device": "cuda"})
    assert outcome["status"] == "unavailable" and "no Nsight Compute" in outcome["message"]
