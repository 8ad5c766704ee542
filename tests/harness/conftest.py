"""Fixtures for the harness tests: plain Python, no database."""

from __future__ import annotations

from typing import Any

import pytest

# Timing kept short: the tests check the method, not the figures.
QUICK_TIMING = {"warmup": 1, "min_reps": 5, "max_reps": 30, "max_seconds": 0.5, "sets": 2}


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def make_job(reference: str, candidate: str, **overrides: Any) -> dict:
    """A CPU job with quick settings; tests override what they are about."""
    job: dict[str, Any] = {
        "mode": "evaluate",
        "reference_source": reference,
        "candidate_source": candidate,
        "backend": "torch",
        "precision": "fp32",
        "atol": None,
        "rtol": None,
        "device": "cpu",
        "seed": 20240611,
        "n_trials": 5,
        "timing": dict(QUICK_TIMING),
        "build_dir": None,
        "time_limit_s": 60,
        "measure": False,
    }
    job.update(overrides)
    return job


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One extension cache for the whole session: each C++ source compiles once."""
    return str(tmp_path_factory.mktemp("kb-build"))
