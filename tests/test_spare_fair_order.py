"""The spare judge a runner starts beside an evaluation is prepared for the row the fair rule
(evaluation/fairness.py) takes next, not for the row after it in the broker's order (issue 63:
"build-ahead and spare workers follow the same order"). Logic through the real database and
the runner's build_job; the pool's own matching of spares to jobs is tested with real processes
in tests/harness/test_sandbox_pool.py."""

import pytest

from evaluation.services import hardware_register
from evaluator.config import normalize_job
from evaluator.runner import pool
from gpu_runner.services import build_job
from submissions.models import Submission
from tests.leaderboard_factory import make_problem
from tests.test_fair_share import queue

pytestmark = pytest.mark.django_db


@pytest.fixture
def problem(db):
    return make_problem(1, 1)


@pytest.fixture
def accounts(django_user_model):
    return {name: django_user_model.objects.create_user(name, password="a-long-passphrase-1")
            for name in ("ada", "bob")}


@pytest.fixture
def cpu(db):
    return hardware_register(slug="cpu", name="CPU", kind="cpu", backends=["torch", "triton"])


def _running(submission: Submission) -> Submission:
    Submission.objects.filter(pk=submission.pk).update(status=Submission.Status.RUNNING,
                                                       started_at=submission.created_at)
    submission.refresh_from_db()
    return submission


def test_the_spare_is_prepared_for_the_fair_next_row_not_the_oldest(cpu, problem, accounts):
    """Ada's three torch rows came first and one runs; Bob's Triton row (whose CPU sandbox runs
    its interpreter) came after them. First in, first out would prepare a torch spare; the fair
    rule takes Bob's next."""
    ada = queue(problem, cpu, accounts["ada"], 3, backend="torch")
    queue(problem, cpu, accounts["bob"], 1, backend="triton")
    job = normalize_job(build_job(_running(ada[0])))
    assert job["backend"] == "torch"
    assert job["spare_backend"] == "triton"
    spare = pool.spare_job(job)
    assert spare["backend"] == "triton"
    # The spare's key is the one Bob's job will look for, not the running job's.
    bob_job = normalize_job(build_job(Submission.objects.get(user=accounts["bob"])))
    assert pool.spec_keys(bob_job, "on")[0] == pool.spec_key(pool.spec_of(spare), "on")
    assert pool.spec_keys(job, "on")[0] != pool.spec_key(pool.spec_of(spare), "on")


def test_with_nothing_waiting_the_spare_is_for_a_job_like_this_one(cpu, problem, accounts):
    only = queue(problem, cpu, accounts["ada"], 1, backend="triton")
    job = normalize_job(build_job(_running(only[0])))
    assert job["spare_backend"] == "triton"
    assert pool.spare_job(job)["backend"] == "triton"
