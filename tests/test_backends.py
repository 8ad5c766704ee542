"""The backends' executors (evaluator/backends/): one entry per kernel language, read by the
evaluator, the site's forms, labels, starters and prompts. These hold the table together."""

from __future__ import annotations

import ast

import pytest

from evaluator import backends
from evaluator.config import JobError, normalize_job
from evaluator.runner.static_report import analyze
from kbsite.templatetags.kbsite_tags import LABELS, UNCOMPILED_BACKENDS, label_table

PLAIN_TORCH = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
              "        return torch.relu(x)\n"


def test_every_backend_a_submission_can_name_has_an_executor():
    from submissions.models import Submission

    assert set(Submission.Backend.values) == set(backends.NAMES)


@pytest.mark.parametrize("name", backends.NAMES)
def test_a_backend_that_claims_kernels_says_how_they_are_checked_and_started(name):
    backend = backends.get(name)
    assert backend.label and backend.summary and LABELS[name] == backend.label
    if backend.claims_kernels:
        assert backend.evidence in ("extension", "triton")
        assert backend.starter_kernel and "pass_through" in backend.starter_kernel
        # The starter's kernel is Python once its extension is named.
        ast.parse(backend.starter_kernel.format(name="kb_starter_x"))
    else:
        assert backend.evidence is None and backend.starter_kernel is None


@pytest.mark.parametrize("name", [n for n in backends.NAMES if backends.get(n).claims_kernels])
def test_a_plain_pytorch_file_claimed_as_another_backend_is_named_in_the_static_report(name):
    report = analyze(PLAIN_TORCH, backend=name)
    assert any(f["detail"] == f"claims {name} but defines no {name} kernel"
               for f in report["findings"]), report["findings"]


def test_a_job_is_refused_for_a_backend_its_device_cannot_run_or_one_nobody_knows():
    job = {"reference_source": "", "candidate_source": "", "device": "cpu"}
    for name in backends.NAMES:
        if backends.get(name).gpu_only:
            with pytest.raises(JobError, match="needs a CUDA device"):
                normalize_job({**job, "backend": name})
        else:
            assert normalize_job({**job, "backend": name})["backend"] == name
    with pytest.raises(JobError, match="unknown backend"):
        normalize_job({**job, "backend": "fortran"})
    with pytest.raises(backends.UnknownBackend):
        backends.get("fortran")


def test_the_pages_scripts_read_the_same_labels_as_the_templates():
    html = str(label_table())
    assert 'id="kb-labels"' in html and '"C++"' in html and '"PyTorch"' in html
    assert list(UNCOMPILED_BACKENDS) == ["torch"]


@pytest.mark.slow
def test_a_runner_offers_only_the_backends_its_self_test_passes_through_the_sandbox(tmp_path):
    """Real processes: each backend's starter is judged in the sandbox, as a runner does at start
    (C++ is left out here only because its cold build takes half a minute)."""
    from gpu_runner.detect import self_tested

    lines: list[str] = []
    served = self_tested({"kind": "cpu", "backends": ["torch", "triton", "cuda"]},
                         build_dir=str(tmp_path), log=lines.append)
    assert served == ["torch", "triton"]
    assert any(line.startswith("self-test: torch served") for line in lines)
    assert "self-test: cuda not offered: it needs a CUDA device" in lines


def test_a_backend_whose_package_is_missing_or_whose_kernel_fails_is_not_offered(monkeypatch):
    import importlib.util

    from gpu_runner.detect import self_tested

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "triton" else real_find_spec(name, *a))
    jobs: list[dict] = []

    def run(job: dict) -> dict:
        jobs.append(job)
        return {"verdict": "compile_error", "error": "error: no member named 'x'"}

    lines: list[str] = []
    served = self_tested({"kind": "cpu", "backends": ["triton", "cpp"]}, build_dir=None,
                         log=lines.append, run=run)
    assert served == []
    assert lines == ["self-test: triton not offered: triton is not installed",
                     "self-test: cpp not offered: its self-test kernel was compile_error: "
                     "error: no member named 'x'"]
    # The self-test's build is its own owner's, never a user's, and nothing is timed.
    assert [(j["backend"], j["build_owner"], j["measure"]) for j in jobs] == [
        ("cpp", "runner-self-test", False)]
