"""Our kernels of the languages beside CUDA and Triton (gpu_kernels/languages/, issue 39) and the
check that runs them through a real runner on a GPU (scripts/languages_check.py).

They cannot run here (no GPU), so this holds what a CPU can: every case the check submits has
its file, the site accepts each one as a submission of its language, the static report finds the
language's own kernel in it, and the check's expectations say what each kind must get."""

from types import SimpleNamespace

import pytest

from evaluator.static_report import analyze
from scripts.languages_check import CASES, KERNELS, LANGUAGES, expectation_failure
from submissions.sources import check_kernel_source, check_source_text

# cuTile has no kernels of ours: its compiler does not target the GPUs we can run on (Hopper),
# where the check expects the runner to leave it out.
WRITTEN = [language for language in LANGUAGES if language != "cutile"]
KERNEL_FILES = [(language, kernel, expected) for language in WRITTEN
                for _, kernel, expected in CASES]


def test_the_kernel_folders_hold_exactly_the_cases_the_check_submits():
    for language in WRITTEN:
        on_disk = sorted(path.name for path in (KERNELS / language).glob("*.py"))
        assert on_disk == sorted(kernel for _, kernel, _ in CASES), language


@pytest.mark.parametrize(("language", "kernel", "expected"), KERNEL_FILES,
                         ids=[f"{lang}-{kernel}" for lang, kernel, _ in KERNEL_FILES])
def test_each_kernel_is_a_submission_that_defines_its_languages_own_kernel(
        language, kernel, expected):
    source = (KERNELS / language / kernel).read_text()
    check_source_text(source)
    check_kernel_source(source)
    report = analyze(source, backend=language)
    assert report["kernels"][language], f"no {language} kernel found in {kernel}"
    details = [finding["detail"] for finding in report["findings"]]
    assert not [d for d in details if d.startswith(f"claims {language} but defines no")]
    if expected != "unused":
        # Only the exploit cases may leave a kernel of theirs unused.
        assert not [d for d in details if "is never referenced" in d], details


def _evaluation(verdict="correct", ranks=True, speedup=1.5, flags=(), trials=()):
    return SimpleNamespace(verdict=verdict, ranks=ranks, speedup=speedup, flags=list(flags),
                           trials=list(trials))


def test_a_right_kernel_must_rank_with_a_speedup():
    assert expectation_failure("right", _evaluation()) == ""
    assert "does not rank" in expectation_failure(
        "right", _evaluation(ranks=False, flags=["backend_not_used"]))
    assert expectation_failure("right", _evaluation(speedup=None)) == "no speedup"
    assert expectation_failure("right", None) == "no evaluation stored"


def test_a_wrong_kernel_must_be_incorrect_with_a_diagnosis():
    diagnosed = [{"passed": False, "diagnosis": {"worst": []}}]
    assert expectation_failure("wrong", _evaluation("incorrect", trials=diagnosed)) == ""
    assert expectation_failure("wrong", _evaluation("incorrect", trials=[{"passed": False}])) \
        == "incorrect without a diagnosis"
    assert "not incorrect" in expectation_failure("wrong", _evaluation("runtime_error"))


def test_a_kernel_that_leaves_its_language_unused_must_be_flagged_so():
    assert expectation_failure("unused", _evaluation(flags=["backend_not_used"])) == ""
    assert "not flagged backend_not_used" in expectation_failure("unused", _evaluation())
    with pytest.raises(ValueError):
        expectation_failure("fast", _evaluation())
