"""Admin actions on runs: start, stop and resume the selected runs."""

import pytest
from django.contrib import admin
from django.contrib.messages.storage.fallback import FallbackStorage
from django.test import RequestFactory

from submissions.runs import services as run_services
from submissions.runs.admin import resume_runs, start_runs, stop_runs
from submissions.runs.models import Run

# Fixtures shared by the run tests: llm_model, start_generation_cluster.
pytest_plugins = ["tests.runs_support"]

pytestmark = pytest.mark.django_db


def admin_request(user):
    request = RequestFactory().post("/admin/submissions/run/")
    request.user = user
    request.session = {}
    request._messages = FallbackStorage(request)
    return request


def test_the_actions_start_stop_and_resume_runs_and_say_what_failed(
    llm_model, cpu_hardware, sample_problems, user
):
    first, second = (
        run_services.run_create(
            model=llm_model, problems=[slug], backend="torch", hardware=cpu_hardware
        )
        for slug in ("level1/901_Small_ReLU", "level1/904_Small_Add")
    )
    model_admin = admin.site._registry[Run]
    request = admin_request(user)
    start_runs(model_admin, request, Run.objects.filter(pk=first.pk))
    stop_runs(model_admin, request, Run.objects.all())
    resume_runs(model_admin, request, Run.objects.all())
    first.refresh_from_db()
    second.refresh_from_db()
    # first: started, stopped, resumed; second (never started): stopped, then resumed.
    assert first.status == second.status == Run.Status.RUNNING
    assert first.generations.count() == second.generations.count() == 1
    start_runs(model_admin, request, Run.objects.all())
    texts = [str(m) for m in request._messages]
    assert "1 run(s) started." in texts and "2 run(s) stopped." in texts
    assert any("it cannot be started" in t for t in texts)
