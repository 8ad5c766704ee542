"""POST /api/v1/submissions/batch/: up to 100 at once, all or none."""

import pytest
from django_q.models import OrmQ

from submissions.models import Submission
from tests.api_support import SchemaCheckedClient, token_for
from tests.conftest import kernel_source

pytestmark = pytest.mark.django_db

RELU = kernel_source("relu_correct.py")


@pytest.fixture
def api(user, cpu_hardware, relu_problem):
    return SchemaCheckedClient().with_token(token_for(user))


def item(**overrides) -> dict:
    return {"level": 1, "number": 901, "backend": "torch", "hardware": "cpu", "source": RELU,
            **overrides}


def post_batch(api, items, **extra):
    return api.post("/api/v1/submissions/batch/", {"submissions": items}, format="json", **extra)


def test_a_batch_is_stored_whole_and_every_item_queued(api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = post_batch(api, [item(filename=f"k{i}.py") for i in range(3)])
    assert response.status_code == 202
    accepted = response.json()["submissions"]
    assert [row["status"] for row in accepted] == ["queued"] * 3
    stored = Submission.objects.order_by("pk")
    assert [row["id"] for row in accepted] == [s.pk for s in stored]
    assert [s.filename for s in stored] == ["k0.py", "k1.py", "k2.py"]
    assert OrmQ.objects.filter(key="cpu").count() == 3


def test_one_invalid_item_stores_none_and_names_the_item(api):
    items = [item(), item(hardware="tpu"), item(), item(backend="fortran")]
    response = post_batch(api, items)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_batch"
    assert [(e["index"], e["code"]) for e in body["errors"]] == [
        (1, "unknown_hardware"), (3, "unknown_backend")
    ]
    assert "cpu" in body["errors"][0]["allowed"]
    assert Submission.objects.count() == 0 and OrmQ.objects.count() == 0


def test_an_item_with_a_missing_field_stores_none(api):
    response = post_batch(api, [item(), {"level": 1, "number": 901}])
    assert response.status_code == 400
    assert "submissions" in response.json()["errors"]
    assert Submission.objects.count() == 0


def test_a_batch_of_oversized_sources_answers_413(api, settings):
    settings.SUBMISSION_MAX_BYTES = 500
    response = post_batch(api, [item(source="#" * 501), item(source="#" * 600)])
    assert response.status_code == 413
    assert Submission.objects.count() == 0


def test_a_batch_on_a_retired_problem_answers_409(api, relu_problem):
    relu_problem.retire()
    response = post_batch(api, [item(), item()])
    assert response.status_code == 409
    assert {e["code"] for e in response.json()["errors"]} == {"retired"}
    assert Submission.objects.count() == 0


def test_it_refuses_more_than_100_and_an_empty_batch(api):
    response = post_batch(api, [item()] * 101)
    assert response.status_code == 400
    assert response.json()["code"] == "batch_too_large"
    empty = post_batch(api, [])
    assert empty.status_code == 400
    assert Submission.objects.count() == 0


def test_exactly_100_are_accepted(api, settings):
    settings.QUOTA_GPU_SECONDS_PER_DAY = 0  # 100 unevaluated kernels would pass the budget
    response = post_batch(api, [item()] * 100)
    assert response.status_code == 202
    assert Submission.objects.count() == 100


def test_a_retried_batch_with_an_idempotency_key_returns_the_first_submissions(api):
    first = post_batch(api, [item(), item()], HTTP_IDEMPOTENCY_KEY="batch-1")
    again = post_batch(api, [item(), item()], HTTP_IDEMPOTENCY_KEY="batch-1")
    assert first.status_code == again.status_code == 202
    ids = [row["id"] for row in first.json()["submissions"]]
    assert [row["id"] for row in again.json()["submissions"]] == ids
    assert Submission.objects.count() == 2


def test_a_batch_needs_a_login(relu_problem, cpu_hardware):
    response = post_batch(SchemaCheckedClient(), [item()])
    assert response.status_code == 401
    assert Submission.objects.count() == 0
