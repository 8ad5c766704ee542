"""Authorization on every path: private code and logs reach only their owner and admins (pages,
fragments, downloads, API, event stream, websocket); only admins curate problems, hardware and
runs; no HTTP path writes evaluations, which only runner processes store."""

import asyncio
import json
import re

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import AsyncClient, Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RoutePattern

from evaluation.models import Hardware, Runner
from kbsite.asgi import application
from problems.models import Baseline, Problem, ProblemVersion, Validation
from submissions.models import Evaluation, Submission
from submissions.runs.models import Generation, Model, Run
from submissions.services import submission_create
from tests.conftest import kernel_source

RELU = kernel_source("relu_correct.py")
SECRETS = ("SECRET_SAUCE_71", "COMPILE_SECRET_72", "TRACE_SECRET_73", "LOG_SECRET_74", "918273645")
ORIGIN = [(b"origin", b"http://127.0.0.1")]


def make_user(name: str, **extra):
    return get_user_model().objects.create_user(name, password=f"{name}-long-pass-1", **extra)


def private_submission(owner, problem, hardware) -> Submission:
    """A finished submission on a problem that keeps code private, with logs and seeds."""
    problem.code_visibility = Problem.CodeVisibility.OWNER
    problem.save()
    submission = submission_create(
        user=owner, problem=problem, source=RELU + "# SECRET_SAUCE_71\n", backend="torch",
        hardware=hardware, filename="mine.py",
    )
    Evaluation.objects.create(
        submission=submission, hardware=hardware, problem_version=submission.problem_version,
        source_hash=submission.source_hash, verdict="correct", correct=True,
        error="", compile_log="COMPILE_SECRET_72", traceback="TRACE_SECRET_73",
        logs="LOG_SECRET_74", seeds={"seed": 918273645}, phases={"wall": 1.0},
        candidate_median_ms=1.0, reference_median_ms=2.0, speedup=2.0,
    )
    submission.mark_finished(verdict="correct")
    return submission


def leaked(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


def client_for(user=None, token: str = "") -> Client:
    client = Client(HTTP_AUTHORIZATION=f"Token {token}") if token else Client()
    if user is not None:
        client.force_login(user)
    return client


# ---- private code and logs -----------------------------------------------------------------------


@pytest.fixture
def secret(db, relu_problem, cpu_hardware):
    owner = make_user("owner")
    return private_submission(owner, relu_problem, cpu_hardware)


def paths_of(submission: Submission) -> list[str]:
    pk = submission.pk
    return [
        f"/submissions/{pk}/",
        f"/submissions/{pk}/evaluation/",
        f"/submissions/{pk}/status.json",
        f"/api/v1/submissions/{pk}/",
        "/api/v1/submissions/",
        "/",
        "/leaderboard/",
        f"/leaderboard/1/901/{submission.hardware.slug}/",
        f"/api/v1/leaderboard/boards/1/901/{submission.hardware.slug}/",
    ]


def test_strangers_and_visitors_see_neither_private_code_nor_logs_anywhere(secret):
    stranger = make_user("stranger")
    from tests.api_support import token_for

    visitors = {
        "anonymous": client_for(),
        "stranger by session": client_for(stranger),
        "stranger by token": client_for(token=token_for(stranger)),
    }
    for who, client in visitors.items():
        for path in paths_of(secret):
            response = client.get(path)
            assert response.status_code in (200, 401), (who, path, response.status_code)
            body = b"".join(response.streaming_content) if response.streaming else response.content
            assert leaked(body.decode()) == [], (who, path)
        download = client.get(f"/submissions/{secret.pk}/source/")
        assert download.status_code == 403, who
        assert leaked(download.content.decode()) == []


def test_the_api_tells_strangers_that_the_code_and_logs_are_withheld(secret):
    from tests.api_support import token_for

    client = client_for(token=token_for(make_user("stranger")))
    body = client.get(f"/api/v1/submissions/{secret.pk}/").json()
    assert body["source"] is None
    evaluation = body["evaluation"]
    assert [evaluation[f] for f in ("compile_log", "traceback", "logs", "seeds")] == [None] * 4
    assert body["verdict"] == "correct" and evaluation["speedup"] == 2.0  # results stay public
    assert client.get("/api/v1/submissions/").json()["count"] == 0  # others' are not listed


@pytest.mark.parametrize("who", ["owner", "admin"])
def test_the_owner_and_admins_see_code_logs_and_seeds_everywhere(secret, who):
    user = secret.user if who == "owner" else make_user("root", is_staff=True)
    client = client_for(user)
    page = client.get(f"/submissions/{secret.pk}/").content.decode()
    assert leaked(page) == list(SECRETS)
    api = client.get(f"/api/v1/submissions/{secret.pk}/").json()
    assert leaked(json.dumps(api)) == list(SECRETS)
    download = client.get(f"/submissions/{secret.pk}/source/")
    assert download.status_code == 200 and b"SECRET_SAUCE_71" in download.content


@pytest.mark.django_db(transaction=True)
async def test_the_event_stream_and_the_websocket_carry_no_code_or_logs(
    relu_problem, cpu_hardware
):
    owner = await sync_to_async(make_user)("owner")
    submission = await sync_to_async(private_submission)(owner, relu_problem, cpu_hardware)
    response = await AsyncClient().get(f"/api/v1/submissions/{submission.pk}/events/")
    assert response.status_code == 200
    chunks = await asyncio.wait_for(_collect(response), 30)
    stream = b"".join(chunks).decode()
    assert '"status":"finished"' in stream
    assert leaked(stream) == []

    socket = WebsocketCommunicator(
        application, f"/ws/submissions/{submission.pk}/", headers=ORIGIN
    )
    connected, _ = await socket.connect()
    assert connected
    snapshot = await socket.receive_json_from(timeout=10)
    await socket.disconnect()
    assert snapshot["type"] == "snapshot" and snapshot["status"] == "finished"
    assert leaked(json.dumps(snapshot)) == []


async def _collect(response) -> list[bytes]:
    return [chunk async for chunk in response.streaming_content]


# ---- every route, every writing method -----------------------------------------------------------


def routes(patterns=None, prefix: str = ""):
    """(route, name) of every URL pattern written with path() (the admin's regex ones aside)."""
    for pattern in patterns if patterns is not None else get_resolver().url_patterns:
        if isinstance(pattern, URLResolver):
            yield from routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern) and isinstance(pattern.pattern, RoutePattern):
            yield prefix + str(pattern.pattern), pattern.name


def concrete_paths(route: str, values: dict[str, list[str]]) -> list[str]:
    """Every way to fill the route's parameters from `values` (by parameter name)."""
    paths = ["/" + route]
    for converter, name in re.findall(r"<(?:(\w+):)?(\w+)>", route):
        placeholder = f"<{converter}:{name}>" if converter else f"<{name}>"
        options = values.get(name, ["1"])
        paths = [p.replace(placeholder, option, 1) for p in paths for option in options]
    return paths


def curated_state() -> dict:
    """Every row an ordinary user must never change: what admins curate and runners write."""
    models = [Problem, ProblemVersion, Hardware, Baseline, Validation, Evaluation, Runner, Run,
              Model, Generation]
    return {m.__name__: list(m.objects.order_by("pk").values()) for m in models}


# Routes that end the walker's own session or token, or only concern the walker's account.
SKIPPED = {"logout", "token_revoke", "password_change", "password_reset",
           "password_reset_confirm"}


@pytest.fixture
def world(secret, relu_problem, cpu_hardware):
    """Something of every kind for the routes to point at."""
    model = Model.objects.create(litellm_name="openai/gpt-test")
    run = Run.objects.create(name="r", model=model, hardware=cpu_hardware, backend="torch")
    run.problems.add(relu_problem)
    Runner.objects.create(name="host:cpu:1", hardware=cpu_hardware)
    ids = sorted({str(secret.pk), str(run.pk), str(model.pk), str(relu_problem.pk)})
    return {
        "pk": ids, "object_id": ids, "submission_id": [str(secret.pk)],
        "problem_id": [str(relu_problem.pk)], "level": ["1"], "number": ["901"],
        "hardware": ["cpu"], "username": ["owner"], "action": ["start", "stop", "resume"],
        "app_label": ["problems", "evaluation", "submissions"], "uidb64": ["MQ"],
        "token": ["x"],
    }


WRITE_BODY = {
    "name": "hijack", "status": "published", "slug": "cpu", "kind": "gpu",
    "verdict": "correct", "correct": True, "speedup": 1000.0, "submission": 1,
    "model": "openai/gpt-test", "backend": "torch", "hardware": "cpu", "level": 1, "number": 901,
    "source": RELU, "problems": ["level1/901_Small_ReLU"], "action": "publish",
    "_selected_action": ["1"], "index": "0", "post": "yes",
}


def write_everywhere(clients: list[Client], paths: list[str]) -> list[tuple[str, str, int]]:
    answers = []
    for client in clients:
        for path in paths:
            for method in ("post", "put", "patch", "delete"):
                if method == "post":
                    response = client.post(path, WRITE_BODY)
                else:
                    response = getattr(client, method)(
                        path, json.dumps(WRITE_BODY), content_type="application/json"
                    )
                answers.append((method, path, response.status_code))
    return answers


def test_an_ordinary_user_changes_nothing_admins_curate_or_runners_write_on_any_route(world):
    from tests.api_support import token_for

    user = make_user("mallory")
    paths = [
        path
        for route, name in routes()
        if name not in SKIPPED
        for path in concrete_paths(route, world)
    ]
    assert len(paths) > 100  # the admin's routes are in the walk as well as the site's
    before = curated_state()
    answers = write_everywhere([client_for(user), client_for(token=token_for(user))], paths)
    assert curated_state() == before
    assert not [a for a in answers if a[2] >= 500], [a for a in answers if a[2] >= 500][:5]


def test_no_route_lets_even_an_admin_write_an_evaluation_outside_the_admin(world):
    """Outside the admin site (checked below), no view writes evaluations at all."""
    from tests.api_support import token_for

    admin = make_user("root", is_staff=True, is_superuser=True)
    paths = [
        path
        for route, name in routes()
        if name not in SKIPPED and not route.startswith("admin/")
        for path in concrete_paths(route, world)
    ]
    evaluations = list(Evaluation.objects.order_by("pk").values())
    write_everywhere([client_for(admin), client_for(token=token_for(admin))], paths)
    assert list(Evaluation.objects.order_by("pk").values()) == evaluations


def test_the_admin_site_shows_evaluations_but_cannot_add_change_or_delete_them(secret):
    admin = client_for(make_user("root", is_staff=True, is_superuser=True))
    evaluation = Evaluation.objects.get()
    before = list(Evaluation.objects.values())
    base = "/admin/submissions/evaluation/"
    assert admin.get(base).status_code == 200
    assert admin.get(f"{base}{evaluation.pk}/change/").status_code == 200  # read-only view
    form = {
        "submission": secret.pk, "attempt": 2, "purpose": "submission",
        "hardware": secret.hardware_id, "problem_version": secret.problem_version_id,
        "verdict": "correct", "correct": "on", "source_hash": "x", "speedup": "1000",
        "trials": "[]", "flags": "[]", "static_report": "{}", "environment": "{}",
        "seeds": "{}", "phases": "{}", "finished_at_0": "2030-01-01", "finished_at_1": "00:00",
    }
    assert admin.get(f"{base}add/").status_code == 403
    assert admin.post(f"{base}add/", form).status_code == 403
    assert admin.post(f"{base}{evaluation.pk}/change/", form).status_code == 403
    assert admin.post(f"{base}{evaluation.pk}/delete/", {"post": "yes"}).status_code == 403
    assert list(Evaluation.objects.values()) == before


# ---- curation is for admins ----------------------------------------------------------------------


def test_only_admins_reach_the_curation_and_run_controls(world, cpu_hardware):
    from tests.api_support import token_for

    user = make_user("mallory")
    run = Run.objects.get()
    session = client_for(user)
    for path in ("/admin/problems/problem/add/", "/admin/evaluation/hardware/add/",
                 "/admin/submissions/run/add/", "/admin/problems/baseline/add/"):
        response = session.post(path, WRITE_BODY)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], path
    response = session.post(f"/runs/{run.pk}/start/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    token = client_for(token=token_for(user))
    assert token.post("/api/v1/runs/", WRITE_BODY, content_type="application/json"
                      ).status_code == 403
    assert token.post(f"/api/v1/runs/{run.pk}/start/").status_code == 403
    assert Client().post(f"/api/v1/runs/{run.pk}/stop/").status_code == 401
    run.refresh_from_db()
    assert run.status == Run.Status.PENDING

    admin = make_user("root", is_staff=True)
    read_only = client_for(token=token_for(admin, scopes=("read",)))
    assert read_only.post(f"/api/v1/runs/{run.pk}/stop/").status_code == 403  # scope, not role
