"""One backend table (issue 62): a language added to evaluator/backends is offered by the forms,
detected by a runner, accepted by the API and the service and named by the static report, with
no migration and no edit anywhere else. The test adds one to the table for its own duration."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from evaluator import backends
from evaluator.static_report import analyze
from submissions.models import Submission
from tests.api_support import SchemaCheckedClient, token_for
from tests.conftest import kernel_source

pytestmark = pytest.mark.django_db

MOJO = backends.Backend(
    name="mojo", label="Mojo", summary="custom Mojo kernels (@mojo.kernel)",
    packages=("torch", "mojo"), decorators=("mojo.kernel",), own_kernels=("mojo",),
    evidence="cache", cache_env={"MOJO_CACHE_DIR": "mojo"},
)

MOJO_SOURCE = """\
import torch
import mojo


@mojo.kernel
def scale(x):
    return x


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return scale(x)
"""

PLAIN_TORCH = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
              "        return torch.relu(x)\n"


@pytest.fixture
def mojo(monkeypatch) -> backends.Backend:
    """The table with one more language, as its module and its line in BACKENDS would make it."""
    monkeypatch.setitem(backends.BACKENDS, MOJO.name, MOJO)
    monkeypatch.setattr(backends, "NAMES", (*backends.NAMES, MOJO.name))
    monkeypatch.setattr(backends, "LABELS", {**backends.LABELS, MOJO.name: MOJO.label})
    return MOJO


@pytest.fixture
def cpu(mojo, db):
    """A CPU runner's hardware as it registers at start, with the table above."""
    from evaluation.services import hardware_register
    from gpu_runner.detect import detect

    detected = detect("cpu")
    detected.pop("slug")
    return hardware_register(slug="cpu", **detected)


def test_a_runner_detects_it_where_the_table_says_it_runs(mojo, cpu):
    assert "mojo" in cpu.backends
    assert backends.offered_on("gpu")[-1] == "mojo"  # the table's order


def test_the_forms_offer_it_with_its_label(mojo, user):
    from competitions.admin import CompetitionAdminForm
    from submissions.forms import SubmissionFilterForm, SubmissionForm

    form = SubmissionForm(user=user)
    assert ("mojo", "Mojo") in form.fields["backend"].choices
    assert form.fields["backend"].valid_value("mojo")
    assert not form.fields["backend"].valid_value("fortran")
    assert ("mojo", "Mojo") in SubmissionFilterForm().fields["backend"].choices
    assert ("mojo", "Mojo") in CompetitionAdminForm().fields["backends"].choices


def test_the_api_and_the_service_take_it(mojo, cpu, relu_problem, user):
    from submissions.services import submission_create

    api = SchemaCheckedClient().with_token(token_for(user))
    body = {"problem": relu_problem.slug, "backend": "mojo", "hardware": "cpu",
            "source": kernel_source("relu_correct.py")}
    response = api.post("/api/v1/submissions/", body, format="json")
    assert response.status_code == 202, response.json()
    assert Submission.objects.get().backend == "mojo"

    made = submission_create(user=user, problem=relu_problem, source=MOJO_SOURCE,
                             backend="mojo", hardware=cpu, test_run=True, timed=False)
    assert made.backend == "mojo"

    # A name the table does not hold is refused with the ones it does.
    refused = api.post("/api/v1/submissions/", {**body, "backend": "fortran"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["code"] == "unknown_backend" and "mojo" in refused.json()["allowed"]


def test_a_language_the_table_does_not_hold_has_no_kernels_in_the_static_report():
    assert "mojo" not in analyze(MOJO_SOURCE)["kernels"]


def test_the_static_report_reads_its_decorators_from_the_table(mojo):
    report = analyze(MOJO_SOURCE, backend="mojo")
    assert report["kernels"]["mojo"] == ["scale"] and report["kernels"]["triton"] == []
    assert report["kernels"]["mojo_never_referenced"] == []
    assert mojo.kernel_names(report["kernels"]) == ["scale"]
    assert not any(f["pattern"] == "backend" for f in report["findings"]), report["findings"]
    fallback = analyze(PLAIN_TORCH, backend="mojo")
    assert any(f["detail"] == "claims mojo but defines no mojo kernel"
               for f in fallback["findings"]), fallback["findings"]


def test_it_needs_no_migration(mojo):
    # Exits non-zero (SystemExit) where a model change has no migration yet.
    call_command("makemigrations", "submissions", check=True, dry_run=True, verbosity=0)
    assert not Submission._meta.get_field("backend").choices
