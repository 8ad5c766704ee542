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


def _hide_package(monkeypatch, package: str) -> None:
    """As on a runner where `package` is not installed: its import spec is not found."""
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == package else real_find_spec(name, *a))


def test_a_backend_whose_package_is_missing_or_whose_kernel_fails_is_not_offered(monkeypatch):

    from gpu_runner.detect import self_tested

    _hide_package(monkeypatch, "triton")
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


# ---- Helion: PyTorch-like kernels over tiles, compiled to Triton on a GPU ----------------------

def test_helion_is_a_gpu_backend_whose_kernels_are_checked_in_the_triton_cache():
    helion = backends.get("helion")
    assert "helion" in backends.NAMES and LABELS["helion"] == "Helion"
    assert helion.gpu_only and not helion.runs_on("cpu") and helion.runs_on("cuda")
    assert helion.packages == ("torch", "triton", "helion")
    assert (helion.own_kernels, helion.evidence) == (("helion",), "triton")
    # `@helion.kernel def f` runs as the Triton kernel `_helion_f`.
    assert helion.device_kernel_names({"helion": ["f"], "triton": ["g"]}) == ["_helion_f"]
    assert backends.get("triton").device_kernel_names({"helion": ["f"], "triton": ["g"]}) == ["g"]


def test_the_helion_starter_pins_its_config_and_is_the_backends_own_kernel():
    from evaluator.backends.starters import starter_file
    from evaluator.runner.selftest import REFERENCE

    source = starter_file(REFERENCE, "helion", slug="level1/19_ReLU")
    ast.parse(source)
    # One config given: Helion compiles it and autotunes nothing.
    assert "@helion.kernel(config=helion.Config(block_sizes=[1024], num_warps=4))" in source
    assert "for tile in hl.tile(x.size(0)):" in source and "view(-1)" in source
    report = analyze(source, reference_source=REFERENCE, backend="helion")
    assert report["kernels"]["helion"] == ["pass_through_kernel"]
    assert report["kernels"]["triton"] == []
    assert not [f for f in report["findings"] if f["pattern"] == "backend"], report["findings"]


def test_a_cpu_host_never_offers_helion():
    from gpu_runner.detect import detect, self_tested

    assert "helion" not in detect("cpu")["backends"]

    jobs: list[str] = []

    def run(job: dict) -> dict:
        jobs.append(job["backend"])
        return {"verdict": "correct"}

    lines: list[str] = []
    served = self_tested({"kind": "cpu", "backends": ["torch", "helion"]}, build_dir=None,
                         log=lines.append, run=run)
    assert served == ["torch"] and jobs == ["torch"]  # nothing of Helion's is run
    assert "self-test: helion not offered: it needs a CUDA device" in lines


def test_a_gpu_runner_without_helion_installed_offers_the_rest_and_says_why(monkeypatch):

    from gpu_runner.detect import self_tested

    _hide_package(monkeypatch, "helion")
    jobs: list[str] = []

    def run(job: dict) -> dict:
        jobs.append(job["backend"])
        return {"verdict": "correct"}

    lines: list[str] = []
    served = self_tested({"kind": "gpu", "backends": ["cuda", "triton", "torch", "helion"]},
                         build_dir=None, log=lines.append, run=run)
    assert served == ["cuda", "triton", "torch"] and jobs == ["cuda", "triton", "torch"]
    assert lines[-1] == "self-test: helion not offered: helion is not installed"


def test_a_call_of_the_candidates_helion_kernel_counts_as_its_own_in_the_profiled_call(
    tmp_path, monkeypatch
):
    """Helion writes the Triton kernel it generates outside the candidate's folder, so the
    worker's probe counts the call of the helion.Kernel whose function is the candidate's."""
    import sys
    import types

    from evaluator.worker.probe import OwnCodeProfile

    class Kernel:  # helion.runtime.kernel.Kernel's shape: the decorated function as `fn`
        def __init__(self, fn):
            self.fn = fn

        def __call__(self, *args):
            return self.fn(*args)

    # No extension of the candidate's here (and the test process's gc holds dead weak proxies).
    monkeypatch.setattr(OwnCodeProfile, "_extension_functions", lambda self: (set(), set()))
    module = types.ModuleType("helion.runtime.kernel")
    module.Kernel = Kernel
    monkeypatch.setitem(sys.modules, "helion.runtime.kernel", module)
    candidate, elsewhere = {}, {}
    exec(compile("def double(x):\n    return 2 * x\n", str(tmp_path / "candidate.py"), "exec"),
         candidate)
    exec(compile("def triple(x):\n    return 3 * x\n", "/elsewhere/lib.py", "exec"), elsewhere)
    own = OwnCodeProfile(str(tmp_path))
    sys.setprofile(own.hook)
    try:
        results = Kernel(candidate["double"])(3), Kernel(elsewhere["triple"])(3)
    finally:
        sys.setprofile(None)
    assert results == (6, 9)
    assert (own.calls, own.names) == (1, {"double"})


def test_the_triton_evidence_finds_a_helion_kernel_under_its_generated_name(tmp_path):
    from evaluator.judge.evidence import triton_evidence

    def check(prefix: str) -> dict:
        return triton_evidence(["copy"], source_kernels=["copy"], build_root=tmp_path,
                               on_gpu=True, prefix=prefix)

    assert check("_helion_")["missing"] == (
        "no compiled artifact of the reported kernels in the slot")
    (tmp_path / "triton" / "KEY").mkdir(parents=True)
    (tmp_path / "triton" / "KEY" / "_helion_copy.cubin").write_bytes(b"\0")
    helion = check("_helion_")
    assert helion["ok"] and helion["compiled"] == ["copy"]
    # A @triton.jit kernel `copy` is not compiled as `_helion_copy`.
    assert not check("")["ok"]
