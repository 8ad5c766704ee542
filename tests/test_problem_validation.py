"""Validating references on the CPU: the checks in the sandboxed child, and the queued flow.

Slow (the tests that run the harness or a runner): what a reference does (its memory, its time,
its outputs, a crash) is known only by running it in the real sandboxed child.
"""

from pathlib import Path

import pytest
from django.core.management import call_command

from evaluator.runner.sandbox import run_job
from gpu_runner.curation import (
    VALIDATION_TIMING,
    validate_problem,
    validation_store,
    validations_run,
)
from problems.curation import validation_request
from problems.models import Problem, PublishRefused, Validation
from problems.services import problem_upsert
from tests.conftest import wait_for

PROBLEMS = Path(__file__).resolve().parent / "problems"


def validate_source(name: str, **job) -> dict:
    return run_job({
        "mode": "validate",
        "reference_source": (PROBLEMS / f"{name}.py").read_text(),
        "device": "cpu",
        "seed": 1234,
        "timing": dict(VALIDATION_TIMING),
        "time_limit_s": 120,
        **job,
    })


def codes(result: dict) -> list[str]:
    return [finding["code"] for finding in result["findings"]]


def test_a_sound_reference_passes_with_its_memory_and_time_measured():
    result = validate_source("sound")

    assert result["status"] == "passed", result
    assert result["findings"] == []
    assert result["peak_memory_bytes"] > 0
    assert result["reference"]["median_ms"] > 0
    assert result["checks"]["inputs_change_output"] is True
    assert result["checks"]["ignored_inputs"] == []
    assert result["checks"]["repeat"]["agree"] and result["checks"]["rebuild"]["agree"]
    assert result["environment"]["device"] == "cpu"


@pytest.mark.parametrize(
    ("problem", "code", "words"),
    [
        ("constant_output", "constant_output", "same constant (0.5)"),
        ("near_zero_output", "near_zero_output", "returns zeros"),
        ("nondeterministic", "nondeterministic", "same inputs gave different outputs"),
        ("input_insensitive", "input_insensitive", "stays the same"),
        ("ignores_an_input", "input_ignored", "Changing input 1 ((16, 32) float32) alone"),
        ("nan_output", "nonfinite_output", "NaN or infinite"),
    ],
)
def test_a_degenerate_reference_is_flagged_with_a_plain_explanation(problem, code, words):
    result = validate_source(problem)

    assert result["status"] == "flagged", result
    assert codes(result) == [code]
    assert words in result["findings"][0]["message"]


def test_a_reference_that_raises_fails_validation_and_says_where():
    result = validate_source("does_not_run")

    assert result["status"] == "failed"
    assert codes(result) == ["does_not_run"]
    message = result["findings"][0]["message"]
    assert "failed while it ran on its inputs" in message
    assert "mat1 and mat2 shapes cannot be multiplied" in message


def test_a_tolerance_override_decides_what_counts_as_near_zero():
    # Outputs around 1e-8: near zero at the default fp32 tolerance, not at a tiny one.
    assert codes(validate_source("near_zero_output")) == ["near_zero_output"]
    strict = validate_source("near_zero_output", atol=1e-12, rtol=1e-12)
    assert "near_zero_output" not in codes(strict)


def test_a_validation_that_ends_without_a_result_blocks_publishing(db, cpu_hardware):
    problem = problem_upsert(
        level=1, number=77, name="Hangs", source=(PROBLEMS / "sound.py").read_text()
    ).problem
    validation = validation_request(problem=problem, hardware=cpu_hardware, enqueue=False)
    validation.claim(runner_name="test", lease_seconds=60)

    validation_store(
        validation, {"verdict": "timeout", "error": "time limit"}, seed=1, time_limit_s=30,
        runner_name="test",
    )

    validation.refresh_from_db()
    assert validation.status == Validation.Status.FAILED
    assert [f["code"] for f in validation.findings] == ["timeout"]
    assert "did not finish within 30 s on cpu" in validation.findings[0]["message"]
    with pytest.raises(PublishRefused):
        Problem.objects.get(pk=problem.pk).publish()


def test_validate_problem_claims_once_and_moves_a_passing_draft_to_validated(db, cpu_hardware):
    problem = problem_upsert(
        level=1, number=78, name="Sound", source=(PROBLEMS / "sound.py").read_text()
    ).problem
    validation = validation_request(problem=problem, hardware=cpu_hardware, enqueue=False)

    assert validate_problem(validation_id=validation.pk, runner_name="r1") == "passed"
    # A redelivered task finds nothing to claim.
    assert validate_problem(validation_id=validation.pk, runner_name="r2") == "not claimed"

    validation.refresh_from_db()
    assert validation.runner_name == "r1"
    assert validation.details["seed"] > 0
    assert validation.reference_ms > 0 and validation.peak_memory_bytes > 0
    problem.refresh_from_db()
    assert problem.status == Problem.Status.VALIDATED


def test_a_batch_cut_short_by_a_crash_reruns_the_rest_alone(db, cpu_hardware):
    names = ["sound", "kills_its_process", "constant_output"]
    problems = [
        problem_upsert(
            level=3, number=i, name=name, source=(PROBLEMS / f"{name}.py").read_text()
        ).problem
        for i, name in enumerate(names, start=1)
    ]
    validations = [
        validation_request(problem=p, hardware=cpu_hardware, enqueue=False) for p in problems
    ]
    seen = []

    validations_run(
        validations=validations, runner_name="bulk", batch_size=3, on_done=seen.append
    )

    assert [v.pk for v in seen] == [v.pk for v in validations]
    sound, crasher, constant = (Validation.objects.get(pk=v.pk) for v in validations)
    assert sound.status == Validation.Status.PASSED
    assert crasher.status == Validation.Status.FAILED
    assert [f["code"] for f in crasher.findings] == ["validation_error"]
    assert "exited with status" in crasher.findings[0]["message"]
    assert constant.status == Validation.Status.FLAGGED
    assert [f["code"] for f in constant.findings] == ["constant_output"]


@pytest.mark.django_db(transaction=True)
def test_validations_go_through_the_queue_to_a_real_runner(cpu_hardware, start_runner):
    sound = problem_upsert(
        level=1, number=81, name="Sound", source=(PROBLEMS / "sound.py").read_text()
    ).problem
    constant = problem_upsert(
        level=1, number=82, name="Constant", source=(PROBLEMS / "constant_output.py").read_text()
    ).problem
    queued = [
        validation_request(problem=problem, hardware=cpu_hardware)
        for problem in (sound, constant)
    ]
    assert {v.status for v in queued} == {Validation.Status.QUEUED}

    start_runner()

    def finished():
        rows = Validation.objects.filter(pk__in=[v.pk for v in queued])
        return all(v.is_finished for v in rows)

    wait_for(finished, timeout=240)
    passed = Validation.objects.get(pk=queued[0].pk)
    flagged = Validation.objects.get(pk=queued[1].pk)
    assert passed.status == Validation.Status.PASSED and passed.findings == []
    assert ":cpu:" in passed.runner_name  # the runner process's name, host:queue:pid
    assert flagged.status == Validation.Status.FLAGGED
    assert [f["code"] for f in flagged.findings] == ["constant_output"]

    sound.refresh_from_db()
    constant.refresh_from_db()
    assert sound.status == Problem.Status.VALIDATED
    assert constant.status == Problem.Status.DRAFT
    with pytest.raises(PublishRefused, match="constant_output"):
        constant.publish()
    constant.publish(override_reason="The constant is the point of this teaching example.")
    constant.refresh_from_db()
    assert constant.status == Problem.Status.PUBLISHED
    assert constant.findings_override_reason.startswith("The constant is the point")


def test_the_command_validates_here_in_batches_and_reports_the_findings(
    db, cpu_hardware, capsys
):
    for number, name in ((1, "sound"), (2, "near_zero_output"), (3, "input_insensitive")):
        source = (PROBLEMS / f"{name}.py").read_text()
        problem_upsert(level=4, number=number, name=name, source=source)

    call_command(
        "validate_problems", "--hardware", "cpu", "--level", "4", "--here", "--batch", "2",
        "--shard", "0/1",
    )

    out = capsys.readouterr().out
    assert "level4/1_sound: passed - ref" in out
    assert "level4/2_near_zero_output: flagged near_zero_output" in out
    assert "cpu: 2 flagged, 1 passed" in out
    assert "    input_insensitive: The output stays the same" in out

    call_command("validate_problems", "--hardware", "cpu", "--level", "4", "--missing-only")
    assert "queued 0 validations on cpu" in capsys.readouterr().out
    call_command("validate_problems", "--hardware", "cpu", "--level", "4", "--shard", "1/2")
    assert "queued 1 validations on cpu" in capsys.readouterr().out
