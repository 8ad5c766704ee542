"""The web pages: submit (upload or paste), a submission's page, the user's list."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from problems.models import Problem
from problems.starters import starter_source
from submissions.models import Evaluation, Submission
from submissions.services import submission_create
from tests.conftest import kernel_source

pytestmark = pytest.mark.django_db

RELU = kernel_source("relu_correct.py")


@pytest.fixture
def client(user):
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def stranger_client(db):
    stranger = get_user_model().objects.create_user("bob", password="another-passphrase-2")
    client = Client()
    client.force_login(stranger)
    return client


def form(problem, **overrides) -> dict:
    return {"problem": problem.pk, "backend": "torch", "hardware": "cpu", "precision": "fp32",
            "source": RELU, **overrides}


def make(user, problem, hardware, **fields) -> Submission:
    return submission_create(
        user=user, problem=problem, source=fields.pop("source", RELU), backend="torch",
        hardware=hardware, **fields,
    )


def finish(submission: Submission, **fields) -> Evaluation:
    values = {
        "verdict": "incorrect", "correct": False, "error": "trial 1: max diff 0.5",
        "compile_log": "nvcc: warning about <stuff>", "traceback": "Traceback: boom",
        "trials": [{"k": 0, "passed": True, "max_abs_diff": 0.0, "mean_abs_diff": 0.0},
                   {"k": 1, "passed": False, "max_abs_diff": 0.5, "mean_abs_diff": 0.01,
                    "reason": "mismatch"}],
        "candidate_stats": {"median_ms": 1.5, "mean_ms": 1.6, "std_ms": 0.1, "min_ms": 1.4,
                            "max_ms": 1.9, "n": 20},
        "reference_stats": {"median_ms": 3.0, "mean_ms": 3.1, "std_ms": 0.2, "min_ms": 2.9,
                            "max_ms": 3.5, "n": 20},
        "candidate_median_ms": 1.5, "reference_median_ms": 3.0, "speedup": 2.0,
        **fields,
    }
    evaluation = Evaluation.objects.create(
        submission=submission, hardware=submission.hardware,
        problem_version=submission.problem_version, source_hash=submission.source_hash,
        **values,
    )
    submission.mark_finished(verdict=evaluation.verdict)
    return evaluation


def test_pasted_code_is_submitted_and_the_page_shows_it_queued(client, relu_problem, cpu_hardware):
    response = client.post("/submissions/new/", form(relu_problem))
    assert response.status_code == 302
    submission = Submission.objects.get()
    assert response["Location"] == f"/submissions/{submission.pk}/"
    page = client.get(response["Location"]).content.decode()
    assert 'id="status">queued<' in page
    assert "position 1 in the queue" in page
    assert 'class="highlight"' in page  # the code, highlighted


def test_an_uploaded_file_is_submitted_with_its_name(client, relu_problem, cpu_hardware):
    upload = SimpleUploadedFile("relu_kernel.py", RELU.encode())
    response = client.post("/submissions/new/", form(relu_problem, source="", source_file=upload))
    assert response.status_code == 302
    submission = Submission.objects.get()
    assert (submission.filename, submission.source) == ("relu_kernel.py", RELU)


def test_the_form_preselects_the_problem_from_the_link(client, relu_problem, cpu_hardware):
    page = client.get(f"/submissions/new/?problem={relu_problem.pk}").content.decode()
    assert f'<option value="{relu_problem.pk}" selected>' in page


def test_the_link_from_a_problem_starts_from_its_pytorch_starter(
    client, relu_problem, cpu_hardware
):
    page = client.get(f"/submissions/new/?problem={relu_problem.pk}").content.decode()
    assert "class ModelNew(" in page and "class Model(" not in page
    assert f"# A PyTorch starter for {relu_problem.slug}" in page
    # The starter passes the upload check as it is, and is evaluated like any kernel.
    starter = starter_source(problem=relu_problem, backend="torch")
    response = client.post("/submissions/new/", form(relu_problem, source=starter))
    assert response.status_code == 302 and Submission.objects.get().source == starter


def test_it_rejects_an_upload_that_is_not_utf8(client, relu_problem, cpu_hardware):
    upload = SimpleUploadedFile("bad.py", b"\xff\xfe" + RELU.encode())
    response = client.post("/submissions/new/", form(relu_problem, source="", source_file=upload))
    assert response.status_code == 400
    assert "not UTF-8" in response.content.decode()
    assert Submission.objects.count() == 0


def test_it_rejects_an_upload_over_the_limit(client, relu_problem, cpu_hardware, settings):
    settings.SUBMISSION_MAX_BYTES = 100
    upload = SimpleUploadedFile("big.py", b"#" * 101)
    response = client.post("/submissions/new/", form(relu_problem, source="", source_file=upload))
    assert response.status_code == 413
    assert "limit is 100" in response.content.decode()
    assert Submission.objects.count() == 0


def test_it_asks_for_code_when_there_is_none(client, relu_problem, cpu_hardware):
    response = client.post("/submissions/new/", form(relu_problem, source=""))
    assert response.status_code == 400
    assert "Upload a file or paste the code" in response.content.decode()
    assert Submission.objects.count() == 0


def test_a_retired_problem_is_not_offered(client, relu_problem, cpu_hardware):
    relu_problem.retire()
    response = client.post("/submissions/new/", form(relu_problem))
    assert response.status_code == 400
    assert Submission.objects.count() == 0


def test_submitting_needs_a_login(relu_problem, cpu_hardware):
    response = Client().post("/submissions/new/", form(relu_problem))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert Submission.objects.count() == 0


def test_the_page_shows_verdict_trials_timing_and_compiler_output(
    client, user, relu_problem, cpu_hardware
):
    submission = make(user, relu_problem, cpu_hardware)
    finish(submission)
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert 'class="verdict incorrect">incorrect<' in page
    assert 'id="trials"' in page and "mismatch" in page and "0.5" in page
    assert 'id="timing"' in page and "1.5 ms" in page and "3 ms" in page
    assert "2.00×" in page
    assert "nvcc: warning about &lt;stuff&gt;" in page  # compiler output, escaped
    assert "Traceback: boom" in page
    assert "trial 1: max diff 0.5" in page


def test_the_page_says_what_the_gpu_driver_saw_while_it_was_timed(
    client, user, relu_problem, cpu_hardware
):
    seen = {"sampled": True, "comparable": True, "others": 1, "others_max_sm_util_pct": 60,
            "start": {"sm_clock_mhz": 1980, "temperature_c": 40},
            "end": {"sm_clock_mhz": 1980, "temperature_c": 43}}
    submission = make(user, relu_problem, cpu_hardware)
    finish(submission, static_report={"timing": {"device_seen": seen}})
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    line = re.search(r'<p class="muted" id="device-seen">(.*?)</p>', page).group(1)
    assert "SM clock 1980 MHz" in line and "temperature 40 to 43 °C" in line
    assert "1 other process used it" in line
    # Nothing sampled (a CPU, or no NVML): no line at all.
    other = make(user, relu_problem, cpu_hardware)
    finish(other, static_report={"timing": {"device_seen": {"sampled": False, "why": "a CPU"}}})
    assert 'id="device-seen"' not in client.get(f"/submissions/{other.pk}/").content.decode()


def test_others_see_the_verdict_but_not_the_logs_of_a_private_problem(
    stranger_client, user, relu_problem, cpu_hardware
):
    relu_problem.code_visibility = "owner"  # logs follow the source (selectors.can_see_source)
    relu_problem.save()
    submission = make(user, relu_problem, cpu_hardware)
    finish(submission)
    page = stranger_client.get(f"/submissions/{submission.pk}/").content.decode()
    assert "incorrect" in page and 'id="timing"' in page
    assert "nvcc: warning" not in page and "Traceback: boom" not in page


@pytest.mark.parametrize(
    ("visibility", "after", "visible"),
    [("public", None, True), ("owner", None, False), ("after_date", timedelta(days=1), False),
     ("after_date", timedelta(days=-1), True)],
)
def test_code_visibility_follows_the_problem(
    stranger_client, client, user, relu_problem, cpu_hardware, visibility, after, visible
):
    relu_problem.code_visibility = visibility
    relu_problem.code_visible_after = timezone.now() + after if after else None
    relu_problem.save()
    submission = make(user, relu_problem, cpu_hardware, source=RELU + "# my secret sauce\n")
    page = stranger_client.get(f"/submissions/{submission.pk}/").content.decode()
    assert ("my secret sauce" in page) is visible
    assert "my secret sauce" in client.get(f"/submissions/{submission.pk}/").content.decode()


def test_admins_always_see_the_code(user, relu_problem, cpu_hardware):
    relu_problem.code_visibility = Problem.CodeVisibility.OWNER
    relu_problem.save()
    submission = make(user, relu_problem, cpu_hardware, source=RELU + "# my secret sauce\n")
    admin = get_user_model().objects.create_user("root", password="x-long-pass-9", is_staff=True)
    client = Client()
    client.force_login(admin)
    assert "my secret sauce" in client.get(f"/submissions/{submission.pk}/").content.decode()


def test_script_in_code_filename_and_logs_is_escaped(client, user, relu_problem, cpu_hardware):
    submission = make(
        user, relu_problem, cpu_hardware, source=RELU + "# <script>alert(1)</script>\n",
        filename="<script>alert(2)</script>.py",
    )
    finish(submission, compile_log="<script>alert(3)</script>", error="<img src=x onerror=4>")
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(2)&lt;/script&gt;.py" in page


def test_the_evaluation_part_is_served_alone_for_the_live_page(
    client, user, relu_problem, cpu_hardware
):
    submission = make(user, relu_problem, cpu_hardware)
    assert "trials" not in client.get(f"/submissions/{submission.pk}/evaluation/").content.decode()
    finish(submission)
    fragment = client.get(f"/submissions/{submission.pk}/evaluation/").content.decode()
    assert 'id="trials"' in fragment and "<html" not in fragment


def test_my_list_shows_only_my_submissions_and_filters_them(
    client, user, relu_problem, cpu_hardware, sample_problems
):
    queued = make(user, relu_problem, cpu_hardware)
    done = make(user, relu_problem, cpu_hardware)
    finish(done)
    other = get_user_model().objects.create_user("bob", password="another-passphrase-2")
    theirs = make(other, relu_problem, cpu_hardware)

    def listed(**query) -> set[int]:
        page = client.get("/submissions/", query).content.decode()
        return {int(pk) for pk in re.findall(r'data-submission="(\d+)"', page)}

    assert listed() == {queued.pk, done.pk}
    assert theirs.pk not in listed()
    assert listed(status="queued") == {queued.pk}
    assert listed(verdict="incorrect") == {done.pk}
    assert listed(problem="Softmax") == set()
    assert listed(hardware="cpu", backend="torch") == {queued.pk, done.pk}


def test_my_list_needs_a_login():
    response = Client().get("/submissions/")
    assert response.status_code == 302
