"""Output safety: what submitters and their kernels write (code, filenames, compiler output,
tracebacks, logs) is escaped on every page, stripped of terminal escapes and cut with a marker
when shown, and downloaded only as a plain-text attachment."""

import pytest
from django.test import Client

from submissions.models import Evaluation, Submission
from tests.api_support import SchemaCheckedClient, token_for
from tests.conftest import kernel_source

pytestmark = pytest.mark.django_db

RELU = kernel_source("relu_correct.py")


def xss(n: int) -> str:
    return f'<script>alert("kb-xss-{n}")</script><img src=x onerror=alert({n})>'


@pytest.fixture
def owner(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def api(user):
    return SchemaCheckedClient().with_token(token_for(user))


def submit_through_the_api(api, *, source: str = RELU, filename: str = "k.py") -> Submission:
    response = api.post(
        "/api/v1/submissions/",
        {"level": 1, "number": 901, "backend": "torch", "hardware": "cpu", "source": source,
         "filename": filename},
        format="json",
    )
    assert response.status_code == 202, response.content
    return Submission.objects.get(pk=response.json()["id"])


def finish(submission: Submission, **fields) -> Evaluation:
    """What a runner stores for a kernel that failed loudly."""
    evaluation = Evaluation.objects.create(
        submission=submission, hardware=submission.hardware,
        problem_version=submission.problem_version, source_hash=submission.source_hash,
        verdict="compile_error", **fields,
    )
    submission.mark_finished(verdict="compile_error")
    return evaluation


def assert_escaped(page: str, *numbers: int) -> None:
    assert "<script>alert" not in page
    assert "<img src=x" not in page
    for n in numbers:
        # Quotes in text need no escaping: Django escapes them, Pygments (the code) does not.
        shown = page.replace("&quot;", '"')
        assert f'&lt;script&gt;alert("kb-xss-{n}")&lt;/script&gt;' in shown, n
        assert f"&lt;img src=x onerror=alert({n})&gt;" in page, n


def test_script_in_code_filename_compiler_output_traceback_and_logs_is_shown_escaped(
    owner, api, cpu_hardware, relu_problem
):
    submission = submit_through_the_api(
        api, source=RELU + f"# {xss(1)}\n", filename=f"{xss(2)}.py"
    )
    finish(submission, error=xss(3), compile_log=xss(4), traceback=xss(5), logs=xss(6))
    page = owner.get(f"/submissions/{submission.pk}/").content.decode()
    assert 'id="compile-log"' in page and 'id="traceback"' in page and 'id="logs"' in page
    assert_escaped(page, 1, 2, 3, 4, 5, 6)
    fragment = owner.get(f"/submissions/{submission.pk}/evaluation/").content.decode()
    assert_escaped(fragment, 3, 4, 5, 6)
    listing = owner.get("/submissions/").content.decode()
    assert "<script>alert" not in listing
    home = Client().get("/").content.decode()
    assert "<script>alert" not in home


def test_a_token_name_with_markup_is_escaped_on_the_profile(owner):
    owner.post("/accounts/tokens/new/", {"name": xss(7), "scopes": ["read"]})
    page = owner.get("/accounts/profile/").content.decode()
    assert_escaped(page, 7)


def test_logs_are_stripped_of_terminal_escapes_and_cut_with_a_marker_when_shown(
    owner, api, cpu_hardware, relu_problem, settings
):
    settings.LOG_DISPLAY_MAX_CHARS = 2000
    submission = submit_through_the_api(api)
    noisy = "\x1b[31merror: boom\x1b[0m\x07 at \x1b]0;title\x07line 3\n" + "x" * 100_000 + "TAIL"
    finish(submission, error="\x1b[1mbad\x1b[0m kernel", compile_log=noisy, traceback=noisy,
           logs=noisy)
    page = owner.get(f"/submissions/{submission.pk}/").content.decode()
    assert "\x1b" not in page and "\x07" not in page
    assert "error: boom at line 3" in page and "bad kernel" in page
    assert page.count("bytes truncated ...]") == 3
    assert page.count("TAIL") == 3
    assert len(page) < 3 * 2000 + 20_000
    body = api.get(f"/api/v1/submissions/{submission.pk}/").json()
    for field in ("compile_log", "traceback", "logs"):
        shown = body["evaluation"][field]
        assert "\x1b" not in shown and "bytes truncated" in shown and len(shown) < 2100
    assert body["error"] == body["evaluation"]["error"] == "bad kernel"
    status = owner.get(f"/submissions/{submission.pk}/status.json").json()
    assert status["evaluation"]["error"] == "bad kernel"


def test_control_characters_are_dropped_from_stored_filenames(api, cpu_hardware, relu_problem):
    submission = submit_through_the_api(api, filename="a\x1b[31mb\r\nc.py")
    assert submission.filename == "a[31mbc.py"


# ---- raw downloads -------------------------------------------------------------------------------


def test_the_source_downloads_as_a_plain_text_attachment_with_a_safe_name(
    owner, api, cpu_hardware, relu_problem
):
    source = RELU + "# <script>alert(1)</script>\n"
    submission = submit_through_the_api(api, source=source, filename='evil".py')
    response = owner.get(f"/submissions/{submission.pk}/source/")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Disposition"] == 'attachment; filename="evil\\".py"'
    assert response.content.decode() == source  # the file as sent, not HTML


def test_a_download_without_a_filename_is_named_after_the_submission(
    owner, api, cpu_hardware, relu_problem
):
    submission = submit_through_the_api(api, filename="")
    response = owner.get(f"/submissions/{submission.pk}/source/")
    expected = f'attachment; filename="submission-{submission.pk}.py"'
    assert response["Content-Disposition"] == expected


def test_anyone_downloads_code_the_problem_makes_public_and_only_by_get(
    api, cpu_hardware, relu_problem
):
    relu_problem.code_visibility = "public"
    relu_problem.save()
    submission = submit_through_the_api(api)
    visitor = Client()
    assert visitor.get(f"/submissions/{submission.pk}/source/").status_code == 200
    assert visitor.post(f"/submissions/{submission.pk}/source/").status_code == 405
    assert visitor.get("/submissions/999999/source/").status_code == 404
