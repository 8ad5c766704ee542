"""POST/GET /api/v1/submissions/ and GET /api/v1/submissions/ID/: answers and every error."""

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django_q.models import OrmQ

from accounts.models import ApiToken
from problems.models import Problem
from submissions.models import Evaluation, Submission
from submissions.services import submission_create
from tests.api_support import SchemaCheckedClient, token_for
from tests.conftest import kernel_source

pytestmark = pytest.mark.django_db

RELU = kernel_source("relu_correct.py")


@pytest.fixture
def key(user):
    return token_for(user)


@pytest.fixture
def api(key):
    return SchemaCheckedClient().with_token(key)


@pytest.fixture
def anonymous():
    return SchemaCheckedClient()


@pytest.fixture
def ready(cpu_hardware, relu_problem):
    return relu_problem


def payload(**overrides) -> dict:
    return {"level": 1, "number": 901, "backend": "torch", "hardware": "cpu", "source": RELU,
            **overrides}


def nothing_stored() -> bool:
    return Submission.objects.count() == 0 and OrmQ.objects.count() == 0


def post(api, data, **extra):
    return api.post("/api/v1/submissions/", data, format="json", **extra)


# ---- accepted -----------------------------------------------------------------------------------


def test_a_submission_is_accepted_with_202_and_queued_for_its_hardware(
    api, ready, user, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = post(api, payload(filename="relu.py"))
    assert response.status_code == 202
    body = response.json()
    submission = Submission.objects.get()
    assert body["id"] == submission.pk and body["status"] == "queued"
    assert body["url"].endswith(f"/api/v1/submissions/{submission.pk}/")
    assert body["events_url"].endswith(f"/api/v1/submissions/{submission.pk}/events/")
    assert body["stream_url"].startswith("ws://")
    assert body["stream_url"].endswith(f"/ws/submissions/{submission.pk}/")
    assert response["Location"] == body["url"]
    assert (submission.user, submission.source, submission.filename) == (user, RELU, "relu.py")
    assert submission.precision == "fp32"  # the problem's, as none was given
    # The evaluation task waits on the cpu queue, and only there.
    assert list(OrmQ.objects.values_list("key", flat=True)) == ["cpu"]


def test_an_uploaded_file_is_accepted_as_multipart(api, ready):
    upload = SimpleUploadedFile("mine.py", RELU.encode())
    response = api.post(
        "/api/v1/submissions/",
        {"level": 1, "number": 901, "backend": "torch", "hardware": "cpu", "file": upload},
        format="multipart",
    )
    assert response.status_code == 202, response.json()
    submission = Submission.objects.get()
    assert (submission.filename, submission.source) == ("mine.py", RELU)


def test_an_idempotency_key_makes_a_retry_return_the_first_submission(api, ready, user):
    first = post(api, payload(), HTTP_IDEMPOTENCY_KEY="agent-7-try")
    again = post(api, payload(), HTTP_IDEMPOTENCY_KEY="agent-7-try")
    other = post(api, payload(), HTTP_IDEMPOTENCY_KEY="agent-7-other")
    assert first.status_code == again.status_code == other.status_code == 202
    assert first.json()["id"] == again.json()["id"] != other.json()["id"]
    assert Submission.objects.count() == 2
    # Keys belong to their user: another user's same key makes their own submission.
    stranger = get_user_model().objects.create_user("bob", password="another-passphrase-2")
    theirs = post(
        SchemaCheckedClient().with_token(token_for(stranger)), payload(),
        HTTP_IDEMPOTENCY_KEY="agent-7-try",
    )
    assert theirs.json()["id"] not in (first.json()["id"], other.json()["id"])


def test_the_token_records_when_it_was_last_used(api, ready, user):
    token = ApiToken.objects.get(user=user)
    assert token.last_used_at is None
    api.get("/api/v1/submissions/")
    token.refresh_from_db()
    assert token.last_used_at is not None


# ---- refused ------------------------------------------------------------------------------------


def test_it_rejects_a_source_over_the_limit_with_413(api, ready, settings):
    settings.SUBMISSION_MAX_BYTES = 1000
    response = post(api, payload(source="#" * 1001))
    assert response.status_code == 413
    assert response.json()["code"] == "too_large"
    assert "1000" in response.json()["detail"]
    assert nothing_stored()


def test_it_rejects_a_request_body_over_the_limit_before_reading_it(api, ready, settings):
    settings.SUBMISSION_MAX_BYTES = 1000
    response = post(api, payload(source="x = 1\n" * 30000))
    assert response.status_code == 413
    assert response.json()["code"] == "too_large"
    assert nothing_stored()


def test_it_rejects_an_upload_that_is_not_utf8(api, ready):
    upload = SimpleUploadedFile("latin1.py", "# café\n".encode("latin-1") + RELU.encode())
    response = api.post(
        "/api/v1/submissions/",
        {"level": 1, "number": 901, "backend": "torch", "hardware": "cpu", "file": upload},
        format="multipart",
    )
    assert response.status_code == 400
    assert response.json()["code"] == "not_utf8"
    assert nothing_stored()


def test_it_rejects_a_json_body_that_is_not_utf8(api, ready):
    body = b'{"level": 1, "number": 901, "backend": "torch", "hardware": "cpu", "source": "\xff"}'
    response = api.generic("POST", "/api/v1/submissions/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "not_utf8"
    assert nothing_stored()


def test_it_rejects_a_source_with_a_lone_surrogate(api, ready):
    # Valid JSON, but the escaped lone surrogate has no UTF-8 form.
    body = '{"level": 1, "number": 901, "backend": "torch", "hardware": "cpu", ' \
           '"source": "x = 1  # \\ud800"}'
    response = api.generic("POST", "/api/v1/submissions/", body, content_type="application/json")
    assert response.status_code == 400
    assert "urrogate" in str(response.json()["errors"]["source"])
    assert nothing_stored()


@pytest.mark.parametrize(
    ("field", "value", "code", "expected_allowed"),
    [
        ("number", 999, "unknown_problem", "1/901"),
        ("backend", "fortran", "unknown_backend", "triton"),
        ("hardware", "tpu", "unknown_hardware", "cpu"),
        ("precision", "fp8", "unknown_precision", "bf16"),
    ],
)
def test_it_rejects_unknown_choices_with_the_allowed_values(
    api, ready, field, value, code, expected_allowed
):
    response = post(api, payload(**{field: value}))
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == code
    assert expected_allowed in body["allowed"]
    assert nothing_stored()


def test_helion_is_taken_only_for_hardware_that_serves_it(api, ready):
    from evaluation.services import hardware_register

    # The CPU hardware never lists Helion (a GPU-only backend): refused, with what it runs.
    response = post(api, payload(backend="helion"))
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "unknown_backend" and "helion" not in body["allowed"]
    assert "torch" in body["allowed"] and nothing_stored()
    # A GPU whose runner's self-test passed Helion takes it; one whose did not, refuses it.
    hardware_register(slug="h200", name="NVIDIA H200", kind="gpu",
                      backends=["cuda", "triton", "torch", "helion"])
    hardware_register(slug="h100", name="NVIDIA H100", kind="gpu",
                      backends=["cuda", "triton", "torch"])
    refused = post(api, payload(backend="helion", hardware="h100"))
    assert refused.status_code == 400 and refused.json()["code"] == "unknown_backend"
    accepted = post(api, payload(backend="helion", hardware="h200"))
    assert accepted.status_code == 202, accepted.json()
    submission = Submission.objects.get()
    assert (submission.backend, submission.hardware.slug) == ("helion", "h200")


@pytest.mark.parametrize("backend", ["tilelang", "cute", "cutile"])
def test_each_kernel_language_is_taken_only_for_hardware_that_serves_it(api, ready, backend):
    from evaluation.services import hardware_register

    # The CPU hardware never lists a GPU-only language: refused, with what it runs.
    response = post(api, payload(backend=backend))
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "unknown_backend" and backend not in body["allowed"]
    assert "torch" in body["allowed"] and nothing_stored()
    # A GPU whose runner's self-test passed the language takes it; one whose did not (an H200
    # never serves cuTile) refuses it.
    hardware_register(slug="b200", name="NVIDIA B200", kind="gpu",
                      backends=["cuda", "triton", "torch", backend])
    hardware_register(slug="h200", name="NVIDIA H200", kind="gpu",
                      backends=["cuda", "triton", "torch"])
    refused = post(api, payload(backend=backend, hardware="h200"))
    assert refused.status_code == 400 and refused.json()["code"] == "unknown_backend"
    assert backend not in refused.json()["allowed"] and nothing_stored()
    accepted = post(api, payload(backend=backend, hardware="b200"))
    assert accepted.status_code == 202, accepted.json()
    submission = Submission.objects.get()
    assert (submission.backend, submission.hardware.slug) == (backend, "b200")


def test_it_rejects_missing_fields_and_says_which(api, ready):
    response = post(api, {"level": 1, "number": 901})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid"
    # The hardware may be left out where the site has only one (tests/test_cli.py).
    assert set(body["errors"]) == {"backend", "source"}
    assert nothing_stored()


def test_it_rejects_an_empty_source(api, ready):
    response = post(api, payload(source="   \n"))
    assert response.status_code == 400 and response.json()["code"] == "empty"
    assert nothing_stored()


def test_it_answers_401_when_not_logged_in(anonymous, ready):
    response = post(anonymous, payload())
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Token")
    assert response.json()["code"] == "not_authenticated"
    assert nothing_stored()


def test_a_revoked_token_is_refused(api, ready, user):
    ApiToken.objects.get(user=user).revoke()
    response = post(api, payload())
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"
    assert nothing_stored()


def test_a_read_only_token_cannot_submit(ready, user):
    reader = SchemaCheckedClient().with_token(token_for(user, scopes=("read",)))
    response = post(reader, payload())
    assert response.status_code == 403
    assert "submit" in response.json()["detail"]
    assert nothing_stored()
    assert reader.get("/api/v1/submissions/").status_code == 200


def test_it_throttles_a_user_with_429_and_retry_after(api, ready, settings):
    settings.API_THROTTLE_RATES = {"api_submit": "2/min"}
    assert post(api, payload()).status_code == 202
    assert post(api, payload()).status_code == 202
    response = post(api, payload())
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    assert response.json()["code"] == "throttled"
    assert response.json()["retry_after"] == int(response["Retry-After"])
    assert Submission.objects.count() == 2
    # Throttles count per user: someone else still gets through.
    stranger = get_user_model().objects.create_user("bob", password="another-passphrase-2")
    other = post(SchemaCheckedClient().with_token(token_for(stranger)), payload())
    assert other.status_code == 202


def test_a_browser_session_must_send_the_csrf_token(ready, user):
    session = SchemaCheckedClient(enforce_csrf_checks=True)
    session.force_login(user)
    response = post(session, payload())
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert nothing_stored()


def test_it_rejects_an_overlong_idempotency_key(api, ready):
    response = post(api, payload(), HTTP_IDEMPOTENCY_KEY="k" * 191)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_idempotency_key"
    assert nothing_stored()


def test_it_refuses_a_retired_problem_with_409(api, ready):
    ready.retire()
    response = post(api, payload())
    assert response.status_code == 409
    assert response.json()["code"] == "retired"
    assert nothing_stored()


def test_only_the_runs_creator_submits_for_a_run(api, ready, cpu_hardware):
    from submissions.runs.models import Model, Run

    model = Model.objects.create(litellm_name="openai/gpt-test")
    run = Run.objects.create(name="someone's", model=model, hardware=cpu_hardware)
    response = post(api, payload(run=run.pk))
    assert response.status_code == 403 and response.json()["code"] == "forbidden"
    unknown = post(api, payload(model="nobody/none"))
    assert unknown.status_code == 400 and unknown.json()["allowed"] == ["openai/gpt-test"]
    assert nothing_stored()


# ---- reading ------------------------------------------------------------------------------------


def make_submission(user, problem, hardware, **fields) -> Submission:
    return submission_create(
        user=user, problem=problem, source=RELU, backend="torch", hardware=hardware, **fields
    )


def finish(submission: Submission, **fields) -> Evaluation:
    values = {
        "verdict": "correct", "correct": True, "candidate_median_ms": 0.25,
        "reference_median_ms": 0.5, "speedup": 2.0, "compile_log": "g++ said hi",
        "traceback": "", "logs": "printed", "seeds": {"seed": 42},
        "trials": [{"k": 0, "passed": True, "max_abs_diff": 0.0, "mean_abs_diff": 0.0}],
        "candidate_stats": {"median_ms": 0.25, "n": 30}, "reference_stats": {"median_ms": 0.5},
        **fields,
    }
    evaluation = Evaluation.objects.create(
        submission=submission, hardware=submission.hardware,
        problem_version=submission.problem_version, source_hash=submission.source_hash,
        **values,
    )
    submission.mark_finished(verdict=evaluation.verdict)
    return evaluation


def test_a_queued_submission_shows_its_status_and_queue_position(api, ready, user, cpu_hardware):
    first = make_submission(user, ready, cpu_hardware)
    second = make_submission(user, ready, cpu_hardware)
    body = api.get(f"/api/v1/submissions/{second.pk}/").json()
    assert (body["status"], body["verdict"], body["queue_position"]) == ("queued", None, 2)
    assert body["evaluation"] is None and body["correct"] is None
    assert api.get(f"/api/v1/submissions/{first.pk}/").json()["queue_position"] == 1


def test_a_finished_submission_shows_the_verdict_and_full_evaluation(
    api, ready, user, cpu_hardware
):
    submission = make_submission(user, ready, cpu_hardware)
    finish(submission, flags=["suspicious_timing"], error="")
    body = api.get(f"/api/v1/submissions/{submission.pk}/").json()
    assert body["status"] == "finished" and body["verdict"] == "correct"
    assert body["correct"] is True
    assert (body["candidate_ms"], body["reference_ms"], body["speedup"]) == (0.25, 0.5, 2.0)
    assert body["flags"] == ["suspicious_timing"] and body["error"] is None
    assert body["source"] == RELU
    evaluation = body["evaluation"]
    assert evaluation["trials"][0]["passed"] is True
    assert evaluation["candidate"]["n"] == 30
    # The owner sees the logs and the seeds.
    assert evaluation["compile_log"] == "g++ said hi" and evaluation["seeds"] == {"seed": 42}


def test_others_see_what_the_public_source_gives_but_not_the_seeds(ready, user, cpu_hardware):
    submission = make_submission(user, ready, cpu_hardware)
    finish(submission)
    stranger = get_user_model().objects.create_user("bob", password="another-passphrase-2")
    body = SchemaCheckedClient().with_token(token_for(stranger)).get(
        f"/api/v1/submissions/{submission.pk}/"
    ).json()
    assert body["verdict"] == "correct" and body["source"] == RELU  # the problem's code is public
    evaluation = body["evaluation"]
    # Derived from a source everyone may read (selectors.can_see_source); the seeds are the
    # judge's, for the owner only.
    assert evaluation["compile_log"] == "g++ said hi" and evaluation["seeds"] is None


def test_code_stays_hidden_where_the_problem_says_so_except_for_owner_and_admins(
    api, ready, user, cpu_hardware
):
    ready.code_visibility = Problem.CodeVisibility.OWNER
    ready.save()
    submission = make_submission(user, ready, cpu_hardware)
    path = f"/api/v1/submissions/{submission.pk}/"
    User = get_user_model()
    stranger = User.objects.create_user("bob", password="another-passphrase-2")
    admin = User.objects.create_user("root", password="another-passphrase-3", is_staff=True)
    assert SchemaCheckedClient().with_token(token_for(stranger)).get(path).json()["source"] is None
    assert SchemaCheckedClient().with_token(token_for(admin)).get(path).json()["source"] == RELU
    assert api.get(path).json()["source"] == RELU


def test_an_unknown_submission_is_404(api, ready):
    response = api.get("/api/v1/submissions/12345/")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_reading_a_submission_needs_a_login(anonymous, ready, user, cpu_hardware):
    submission = make_submission(user, ready, cpu_hardware)
    assert anonymous.get(f"/api/v1/submissions/{submission.pk}/").status_code == 401


def test_the_list_holds_only_my_submissions_and_filters_them(api, ready, user, cpu_hardware):
    mine = make_submission(user, ready, cpu_hardware)
    done = make_submission(user, ready, cpu_hardware)
    finish(done, verdict="incorrect", correct=False)
    stranger = get_user_model().objects.create_user("bob", password="another-passphrase-2")
    make_submission(stranger, ready, cpu_hardware)
    everything = api.get("/api/v1/submissions/").json()
    assert [row["id"] for row in everything["results"]] == [done.pk, mine.pk]
    queued = api.get("/api/v1/submissions/", {"status": "queued"}).json()["results"]
    assert [row["id"] for row in queued] == [mine.pk]
    incorrect = api.get("/api/v1/submissions/", {"verdict": "incorrect"}).json()["results"]
    assert [(row["id"], row["verdict"]) for row in incorrect] == [(done.pk, "incorrect")]
    assert api.get("/api/v1/submissions/", {"hardware": "h200"}).json()["results"] == []
