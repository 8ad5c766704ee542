"""A published problem that validation flags (a degenerate reference) is held: off the lists,
the pages and the rankings until an admin publishes it with a reason or retires it."""

from pathlib import Path

import pytest

from gpu_runner.curation import validate_problem
from problems.curation import validation_request
from problems.models import Problem, PublishRefused
from problems.services import problem_upsert

pytestmark = pytest.mark.django_db

PROBLEMS = Path(__file__).resolve().parent / "problems"


def published(number: int, reference: str) -> Problem:
    return problem_upsert(level=2, number=number, name=reference.title(), publish=True,
                          source=(PROBLEMS / f"{reference}.py").read_text()).problem


def validated(problem: Problem, hardware) -> Problem:
    validation = validation_request(problem=problem, hardware=hardware, enqueue=False)
    validate_problem(validation_id=validation.pk, runner_name="test")
    problem.refresh_from_db()
    return problem


def test_a_flagged_validation_holds_a_published_problem_until_an_admin_decides(
    client, cpu_hardware
):
    problem = validated(published(65, "constant_output"), cpu_hardware)

    assert problem.status == Problem.Status.HELD
    assert problem.get_status_display() == "held: validation findings"
    assert problem.slug not in client.get("/problems/").content.decode()
    assert client.get(problem.get_absolute_url()).status_code == 404
    with pytest.raises(PublishRefused):
        problem.publish()
    problem.publish(override_reason="the constant is what the task asks for")
    assert Problem.objects.get(pk=problem.pk).status == Problem.Status.PUBLISHED


def test_an_admins_reason_keeps_it_published_and_a_sound_reference_stays_published(
    cpu_hardware
):
    overridden = published(66, "constant_output")
    Problem.objects.filter(pk=overridden.pk).update(findings_override_reason="known, kept")
    assert validated(overridden, cpu_hardware).status == Problem.Status.PUBLISHED
    assert validated(published(67, "sound"), cpu_hardware).status == Problem.Status.PUBLISHED
