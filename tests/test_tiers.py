"""The suite's two tiers: what tests/conftest.py takes for a test that starts processes."""

import subprocess

from evaluator.runner import sandbox
from evaluator.runner.sandbox import run_job
from tests.conftest import _starts_processes


class Fake:
    def run_job(self, job):
        return job


def _evaluates(job: dict) -> dict:
    return run_job(job)


def _through_a_helper():
    return _evaluates({})


def _through_the_module():
    return sandbox.run_job({})


def _in_a_lambda():
    return (lambda: subprocess.run(["ls"], check=False))()


def _computes():
    return sorted([3, 1, 2])


def _calls_a_stand_in():
    return Fake().run_job({})


# Reached through dicts, so that these tests do not themselves name what they look for (the
# check follows the functions of tests' modules a test names, itself included).
CHECK = {"starts processes": _starts_processes}
SAMPLES = {
    "helper": _through_a_helper,
    "module": _through_the_module,
    "lambda": _in_a_lambda,
    "computes": _computes,
    "stand-in": _calls_a_stand_in,
}


def test_a_test_that_calls_the_sandbox_or_subprocess_through_a_helper_starts_processes():
    starts_processes = CHECK["starts processes"]
    for name in ("helper", "module", "lambda"):
        assert starts_processes(SAMPLES[name]), name


def test_a_test_that_only_computes_or_names_the_harness_as_an_attribute_starts_none():
    starts_processes = CHECK["starts processes"]
    for name in ("computes", "stand-in"):
        assert not starts_processes(SAMPLES[name]), name
    assert not starts_processes(None)
