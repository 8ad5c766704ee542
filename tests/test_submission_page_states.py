"""What a submission's page says while it runs and after: no "compiling" for plain PyTorch,
no "finished" while its re-verification runs, no Nsight Compute on a CPU; and the small pages
around it: an honest password reset, and /favicon.ico."""

import pytest
from django.contrib.staticfiles import finders

from evaluation.services import hardware_register
from submissions.models import Submission
from tests.leaderboard_factory import make_problem, make_result, make_submission

pytestmark = pytest.mark.django_db


@pytest.fixture
def gpu(db):
    return hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")


def running(*, problem, hardware, user, backend: str) -> Submission:
    submission = make_submission(problem=problem, hardware=hardware, user=user, backend=backend)
    Submission.objects.filter(pk=submission.pk).update(
        status=Submission.Status.RUNNING, progress={"phase": "compiling"}
    )
    return submission


def test_a_pytorch_kernel_is_loading_where_a_cuda_one_is_compiling(client, gpu, user):
    problem = make_problem(1, 1)
    client.force_login(user)
    torch = running(problem=problem, hardware=gpu, user=user, backend="torch")
    page = client.get(torch.get_absolute_url()).content.decode()
    assert '<span id="progress">loading</span>' in page and "compiling" not in page
    assert 'data-backend="torch"' in page  # live.js says the same as events arrive
    cuda = running(problem=problem, hardware=gpu, user=user, backend="cuda")
    page = client.get(cuda.get_absolute_url()).content.decode()
    assert '<span id="progress">compiling</span>' in page


def test_a_result_waiting_for_its_re_verification_is_not_shown_finished(client, gpu, user):
    evaluation = make_result(problem=make_problem(1, 1), hardware=gpu, user=user)
    submission = evaluation.submission
    Submission.objects.filter(pk=submission.pk).update(
        reverification=Submission.ReverificationState.PENDING
    )
    client.force_login(user)
    page = client.get(submission.get_absolute_url()).content.decode()
    assert 'data-status="finished" id="status">re-verifying</strong>' in page
    assert 'id="status">finished<' not in page
    Submission.objects.filter(pk=submission.pk).update(
        reverification=Submission.ReverificationState.PASSED
    )
    page = client.get(submission.get_absolute_url()).content.decode()
    assert 'id="status">finished<' in page  # settled


def test_nsight_compute_is_offered_on_a_gpu_submission_and_not_on_a_cpu_one(
    client, gpu, cpu_hardware, user
):
    problem = make_problem(1, 1)
    client.force_login(user)
    on_gpu = make_result(problem=problem, hardware=gpu, user=user).submission
    page = client.get(on_gpu.get_absolute_url()).content.decode()
    assert "Profile with Nsight Compute" in page
    on_cpu = make_result(problem=problem, hardware=cpu_hardware, user=user).submission
    page = client.get(on_cpu.get_absolute_url()).content.decode()
    assert "Profile with Nsight Compute" not in page and 'id="ncu-cpu"' in page


def test_the_password_reset_page_says_what_happens_instead_of_claiming_an_email(client):
    page = client.get("/accounts/password_reset/").content.decode()
    assert "Ask an admin" in page and "manage.py changepassword USERNAME" in page
    assert "emailed" not in page and "<form" not in page.split("<main")[-1]
    # The old form's POST lands on the same page: nothing is sent, nothing is claimed.
    assert "emailed" not in client.get("/accounts/password_reset/done/").content.decode()
    assert 'href="/accounts/password_reset/"' in client.get("/accounts/login/").content.decode()


def test_favicon_ico_answers_with_the_sites_own_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response["Location"].endswith(".ico")
    icon = finders.find("kbsite/favicon.ico")
    with open(icon, "rb") as file:
        assert file.read(4) == b"\x00\x00\x01\x00"  # an ICO header
