"""Curation in the Django admin: list, search, highlighted reference, validate/publish/retire."""

from pathlib import Path

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth import get_user_model
from django.test import Client
from django_q.models import OrmQ

from problems.models import Problem, Tag, Validation
from problems.services import problem_upsert

pytestmark = pytest.mark.django_db

PROBLEMS = Path(__file__).resolve().parent / "problems"
CHANGELIST = "/admin/problems/problem/"


@pytest.fixture
def admin_client_logged_in(db):
    admin = get_user_model().objects.create_superuser(
        username="curator", password="a-long-passphrase-2", email="c@example.org"
    )
    client = Client()
    client.force_login(admin)
    return client


def make_problem(level: int, number: int, name: str, file: str) -> Problem:
    return problem_upsert(
        level=level, number=number, name=name, source=(PROBLEMS / f"{file}.py").read_text()
    ).problem


def finished_validation(problem: Problem, hardware, *, findings: list[dict]) -> Validation:
    validation = Validation.objects.create(
        problem_version=problem.current_version, hardware=hardware
    )
    validation.claim(runner_name="test-runner", lease_seconds=60)
    validation.finish(
        runner_name="test-runner", findings=findings, reference_ms=0.5,
        peak_memory_bytes=3 * 2**20,
    )
    return validation


CONSTANT = {
    "code": "constant_output",
    "message": "Every output value equals the same constant (0.5) within the tolerance.",
}


def action(client: Client, name: str, problems: list[Problem], **data) -> object:
    return client.post(
        CHANGELIST,
        {"action": name, ACTION_CHECKBOX_NAME: [p.pk for p in problems], **data},
        follow="apply" in data,
    )


def test_the_list_filters_by_level_status_and_tag_and_searches(admin_client_logged_in):
    relu = make_problem(1, 1, "Leaky_relu", "sound")
    make_problem(1, 2, "Matmul", "sound")
    conv = make_problem(2, 1, "Conv_min_clamp", "constant_output")
    conv.tags.add(Tag.objects.create(name="fusion"))
    relu.publish()

    def slugs(query: str) -> list[str]:
        response = admin_client_logged_in.get(CHANGELIST + query)
        assert response.status_code == 200
        return [p.slug for p in response.context["cl"].result_list]

    assert slugs("?level=1") == ["level1/1_Leaky_relu", "level1/2_Matmul"]
    assert slugs("?status__exact=published") == ["level1/1_Leaky_relu"]
    assert slugs(f"?tags__id__exact={conv.tags.get().pk}") == ["level2/1_Conv_min_clamp"]
    assert slugs("?q=matmul") == ["level1/2_Matmul"]
    assert slugs("?q=fusion") == ["level2/1_Conv_min_clamp"]


def test_the_change_page_shows_the_reference_highlighted_and_each_finding_explained(
    admin_client_logged_in, cpu_hardware
):
    problem = make_problem(2, 3, "Conv_min_clamp", "constant_output")
    finished_validation(problem, cpu_hardware, findings=[CONSTANT])

    response = admin_client_logged_in.get(f"{CHANGELIST}{problem.pk}/change/")

    html = response.content.decode()
    assert response.status_code == 200
    assert '<div class="highlight">' in html
    assert '<span class="nc">Model</span>' in html  # tokens coloured by pygments
    assert "constant_output" in html and "same constant (0.5)" in html
    assert "/highlight.css" in html  # pygments' colours for the code
    changelist = admin_client_logged_in.get(CHANGELIST).content.decode()
    assert "flagged on cpu: constant_output" in changelist


def test_the_validate_action_asks_for_a_hardware_then_queues_on_its_runners(
    admin_client_logged_in, cpu_hardware, django_capture_on_commit_callbacks
):
    problems = [make_problem(1, 5, "A", "sound"), make_problem(1, 6, "B", "sound")]

    form = action(admin_client_logged_in, "validate_problems", problems)
    assert form.status_code == 200
    assert b"Queue validations" in form.content
    assert not Validation.objects.exists()

    with django_capture_on_commit_callbacks(execute=True):
        done = action(
            admin_client_logged_in, "validate_problems", problems,
            hardware=cpu_hardware.pk, apply="1",
        )

    assert "Queued 2 validation(s) on cpu" in done.content.decode()
    validations = Validation.objects.order_by("pk")
    assert [v.problem_version.problem for v in validations] == problems
    assert {v.status for v in validations} == {Validation.Status.QUEUED}
    assert {v.requested_by.username for v in validations} == {"curator"}
    tasks = [q.task for q in OrmQ.objects.filter(key="cpu")]
    assert sorted(t["args"][0] for t in tasks) == [v.pk for v in validations]
    assert {t["func"] for t in tasks} == {"gpu_runner.tasks.validate"}


def test_publishing_a_flagged_problem_needs_a_reason_and_keeps_it(
    admin_client_logged_in, cpu_hardware
):
    flagged = make_problem(2, 4, "Flagged", "constant_output")
    finished_validation(flagged, cpu_hardware, findings=[CONSTANT])
    clean = make_problem(2, 5, "Clean", "sound")
    finished_validation(clean, cpu_hardware, findings=[])

    form = action(admin_client_logged_in, "publish_problems", [flagged, clean])
    assert b"same constant (0.5)" in form.content
    flagged.refresh_from_db()
    assert flagged.status == Problem.Status.DRAFT  # nothing changes before the answer

    without = action(
        admin_client_logged_in, "publish_problems", [flagged, clean], override_reason="",
        apply="1",
    )
    text = without.content.decode()
    assert "Published level2/5_Clean" in text
    assert "Not published: level2/4_Flagged has validation findings (constant_output)" in text
    flagged.refresh_from_db()
    clean.refresh_from_db()
    assert (flagged.status, clean.status) == ("draft", "published")

    action(
        admin_client_logged_in, "publish_problems", [flagged],
        override_reason="Kept as a known-degenerate example.", apply="1",
    )
    flagged.refresh_from_db()
    assert flagged.status == Problem.Status.PUBLISHED
    assert flagged.findings_override_reason == "Kept as a known-degenerate example."


def test_a_later_clean_validation_lifts_the_block(admin_client_logged_in, cpu_hardware):
    problem = make_problem(2, 6, "Fixed", "sound")
    finished_validation(problem, cpu_hardware, findings=[CONSTANT])
    finished_validation(problem, cpu_hardware, findings=[])

    action(admin_client_logged_in, "publish_problems", [problem])

    problem.refresh_from_db()
    assert problem.status == Problem.Status.PUBLISHED
    assert problem.findings_override_reason == ""


def test_retiring_keeps_versions_and_validations(admin_client_logged_in, cpu_hardware):
    problem = make_problem(1, 9, "Old", "sound")
    problem.publish()
    finished_validation(problem, cpu_hardware, findings=[])

    response = action(admin_client_logged_in, "retire_problems", [problem])

    assert response.status_code == 302
    problem.refresh_from_db()
    assert problem.status == Problem.Status.RETIRED
    assert not problem.is_open_for_submissions
    assert problem.versions.count() == 1
    assert Validation.objects.filter(problem_version__problem=problem).count() == 1
