"""A problem this runner cannot run (level 4: transformers and the hub's model configs) ends
`problem_unavailable`, naming what is missing: never `harness_error`, never the kernel's fault."""

from pathlib import Path

import pytest

from evaluator.errors import unavailable_reason
from evaluator.runner.sandbox import run_job
from tests.harness.conftest import QUICK_TIMING, make_job

HUB_REFERENCE = (Path(__file__).resolve().parents[1] / "problems" / "needs_the_hub.py").read_text()
CANDIDATE = HUB_REFERENCE.replace("class Model(", "class ModelNew(")


def _transformers_installed() -> bool:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


pytestmark = pytest.mark.skipif(
    _transformers_installed(), reason="checks a runner without transformers (this one has it)"
)


def test_an_evaluation_of_a_problem_needing_a_missing_package_names_the_package():
    result = run_job(make_job(HUB_REFERENCE, CANDIDATE))
    assert result["verdict"] == "problem_unavailable", result["error"]
    assert "the Python package 'transformers', which is not installed here" in result["error"]
    assert result["correct"] is False


def test_its_validation_says_so_as_a_finding():
    result = run_job({"mode": "validate", "reference_source": HUB_REFERENCE, "device": "cpu",
                      "seed": 7, "timing": dict(QUICK_TIMING), "time_limit_s": 120})
    assert result["status"] == "failed"
    assert [f["code"] for f in result["findings"]] == ["problem_unavailable"]


def test_a_model_missing_from_the_offline_hub_cache_is_unavailable_too():
    # What transformers raises offline without the model in HF_HOME.
    offline = OSError(
        "We couldn't connect to the hub to load this file, couldn't find it in the cached "
        "files and it looks like google/electra-small-discriminator is not the path to a "
        "directory containing a file named config.json. Checkout your internet connection or "
        "see how to run the library in offline mode."
    )
    reason = unavailable_reason(offline)
    assert reason and "HF_HOME" in reason and "electra-small" in reason
    assert unavailable_reason(OSError("disk full")) is None
    assert unavailable_reason(ValueError("shapes do not match")) is None
