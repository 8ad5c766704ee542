"""`kb` for agents (issue 65): --json on every command (stdout one JSON document, an error too),
the exit statuses as documented, `kb guide` naming only what the site has, and the findings a
new user met: a standing's null rank, a test run's repeated words, a starter in a backend the
site does not run, and the size limit told as the site's own figure.

kb runs in this process against this process's site: its requests go through Django's test
client (tests/test_cli_cancel.py's DjangoTransport), so the command's code, the API and the
services all run for real, without a server process. tests/test_cli_distribution.py runs the
client installed alone.
"""

import json
import re
from datetime import timedelta

import pytest
import requests
from django.urls import resolve
from django.utils import timezone

from competitions.models import Competition
from evaluator.backends import NAMES as BACKEND_NAMES
from evaluator.verdicts import VERDICTS
from kbcli import check, exits, guide
from kbcli import main as kb_main
from kbcli.client import Client as KbClient
from submissions.models import Submission
from submissions.selectors import RANKING_STATE_OF, RankingDetail
from tests.api_support import SchemaCheckedClient, token_for
from tests.conftest import KERNELS, REPO
from tests.test_cancel import RELU, queued
from tests.test_cli_cancel import DjangoTransport

SITE = "http://testserver"
KERNEL = str(KERNELS / "relu_correct.py")
SAMPLE_RELU = REPO / "problems" / "samples" / "level1" / "901_Small_ReLU.py"


@pytest.fixture
def kb(user, monkeypatch, tmp_path):
    """`kb` in this process, logged in to this process's site through KB_URL and KB_TOKEN (as
    an agent's environment may set them), every request of every command going to Django."""
    transport = DjangoTransport()
    adapter = requests.Session.get_adapter
    monkeypatch.setattr(requests.Session, "get_adapter",
                        lambda self, url: transport if url.startswith(SITE) else adapter(self, url))
    # No websocket in the test client: kb follows by polling.
    monkeypatch.setattr(KbClient, "_websocket_events", lambda *args: iter(()))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # kb check's build cache
    monkeypatch.delenv("KB_CONFIG", raising=False)
    monkeypatch.setenv("KB_URL", SITE)
    monkeypatch.setenv("KB_TOKEN", token_for(user))
    return kb_main.main


@pytest.fixture
def world(user, relu_problem, cpu_hardware):
    """A competition to enter and a queued submission of the user's."""
    now = timezone.now()
    competition = Competition.objects.create(
        slug="relu-cup", title="ReLU cup", hardware=cpu_hardware, daily_limit=5,
        starts_at=now - timedelta(hours=1), ends_at=now + timedelta(days=1), published=True,
    )
    competition.problems.set([relu_problem])
    return {"slug": relu_problem.slug, "submission": queued(user, relu_problem, cpu_hardware)}


def run(kb, capsys, argv: list[str]) -> tuple[int, object, str]:
    """kb's exit status, its stdout as JSON, its stderr."""
    status = kb(argv)
    out, err = capsys.readouterr()
    try:
        return status, json.loads(out), err
    except ValueError:
        raise AssertionError(f"`kb {' '.join(argv)}` printed no JSON: {out!r}\n{err}") from None


def fake_check(job, on_event=None) -> dict:
    """The harness's answer to `kb check` (tests/test_cli_check.py runs the real one)."""
    return {"verdict": "correct", "correct": True, "trials": [{"k": 1, "passed": True}],
            "candidate": {"median_ms": 0.5}, "reference": {"median_ms": 1.0}, "speedup": 2.0}


# Every command: its arguments (given the world), its exit status, and what its JSON holds.
CASES = {
    "login": (lambda w: ["login", "--url", SITE, "--token", "$TOKEN"], 0,
              lambda data: data["url"] == SITE and "token" not in data),
    "problems": (lambda w: ["problems"], 0,
                 lambda data: w_slug(data) and isinstance(data, list)),
    "problem": (lambda w: ["problem", w["slug"]], 0,
                lambda data: "class Model" in data["source"]),
    "hardware": (lambda w: ["hardware"], 0, lambda data: data[0]["slug"] == "cpu"),
    "submit": (lambda w: ["submit", KERNEL, "--problem", w["slug"], "--backend", "torch"], 0,
               lambda data: Submission.objects.filter(pk=data["id"]).exists()),
    "test": (lambda w: ["test", KERNEL, "--problem", w["slug"], "--backend", "torch",
                        "--no-wait"], 0,
             lambda data: Submission.objects.get(pk=data["id"]).test_run),
    "status": (lambda w: ["status", str(w["submission"].pk)], 0,
               lambda data: data["status"] == "queued" and data["settled"] is False),
    "list": (lambda w: ["list"], 0, lambda data: data[0]["status"] == "queued"),
    # Only a held result may be asked again: the site's refusal, as JSON.
    "reverify": (lambda w: ["reverify", str(w["submission"].pk)], 1,
                 lambda data: data["error"]["http_status"] == 409
                 and data["error"]["code"] == "not_held"),
    "cancel": (lambda w: ["cancel", str(w["submission"].pk)], 0,
               lambda data: data["status"] == "cancelled"),
    "profile": (lambda w: ["profile", str(w["submission"].pk), "--latest"], 1,
                lambda data: data["error"]["code"] == "not_found"),
    "leaderboard": (lambda w: ["leaderboard", "--problem", w["slug"]], 0,
                    lambda data: data["rows"] == [] and data["hardware"] == "cpu"),
    "competitions": (lambda w: ["competitions"], 0, lambda data: data[0]["slug"] == "relu-cup"),
    "standings": (lambda w: ["standings", "relu-cup"], 0,
                  lambda data: data["standings"] == []),
    "enter": (lambda w: ["enter", "relu-cup", KERNEL, "--problem", w["slug"], "--backend",
                         "torch"], 0,
              lambda data: Submission.objects.filter(pk=data["submission_id"]).exists()),
    "check": (lambda w: ["check", KERNEL, "--reference", str(SAMPLE_RELU)], 0,
              lambda data: data["verdict"] == "correct" and data["speedup"] == 2.0),
    "starter": (lambda w: ["starter", "--problem", w["slug"], "--backend", "torch"], 0,
                lambda data: "class ModelNew" in data["source"]),
    "guide": (lambda w: ["guide"], 0,
              lambda data: data["site"].startswith(SITE) and data["exit_codes"]["3"]),
}


def w_slug(problems: list[dict]) -> bool:
    return "level1/901_Small_ReLU" in {p["slug"] for p in problems}


def test_every_command_has_json_and_a_case_here():
    parser = kb_main.build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert set(commands) == set(CASES)
    for name, sub in commands.items():
        assert any("--json" in action.option_strings for action in sub._actions), name


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_command_prints_one_json_document(name, kb, world, user, monkeypatch, capsys):
    monkeypatch.setattr(check, "run", fake_check)
    arguments, expected_status, holds = CASES[name]
    argv = [token_for(user) if a == "$TOKEN" else a for a in arguments(world)] + ["--json"]
    status, data, err = run(kb, capsys, argv)
    assert status == expected_status, err
    assert holds(data), data


def test_a_wait_that_runs_out_prints_the_submission_as_it_is_and_exits_3(kb, world, capsys):
    status, data, err = run(kb, capsys, ["submit", KERNEL, "--problem", world["slug"],
                                         "--backend", "torch", "--wait", "--timeout", "0",
                                         "--json"])
    assert status == exits.PENDING == 3
    assert data["status"] == "queued" and data["settled"] is False
    assert "was not settled within" in err


def test_a_usage_error_exits_2_and_an_error_of_the_site_1_each_with_a_json_error(
    kb, world, capsys, tmp_path
):
    status, data, err = run(kb, capsys, ["submit", KERNEL, "--backend", "torch", "--json"])
    assert status == exits.USAGE == 2 and data["error"]["code"] == "usage"
    assert "--problem level1/19_ReLU" in err
    status, data, _ = run(kb, capsys, ["submit", str(tmp_path / "none.py"), "--problem",
                                       world["slug"], "--backend", "torch", "--json"])
    assert status == 2 and data["error"]["code"] == "unreadable"
    # The site's refusal: its own words, code and allowed values.
    status, data, err = run(kb, capsys, ["submit", KERNEL, "--problem", world["slug"],
                                         "--backend", "torch", "--hardware", "tpu", "--json"])
    assert status == exits.FAILED == 1
    assert data["error"]["code"] == "unknown_hardware" and data["error"]["allowed"] == ["cpu"]
    assert data["error"]["detail"] == "Unknown hardware 'tpu'." and "(HTTP 400)" in err


def test_not_logged_in_says_how_with_a_json_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for name in ("KB_URL", "KB_TOKEN", "KB_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    status, data, err = run(kb_main.main, capsys, ["problems", "--json"])
    assert status == 1 and data["error"]["code"] == "not_logged_in" and "kb login" in err


def test_the_exit_statuses_are_documented_in_help_and_the_guide():
    assert set(exits.MEANINGS) == {exits.OK, exits.FAILED, exits.USAGE, exits.PENDING}
    assert (kb_main.EXIT_OK, kb_main.EXIT_FAILED, kb_main.EXIT_USAGE, kb_main.EXIT_PENDING) == (
        0, 1, 2, 3)
    help_text = kb_main.build_parser().format_help()
    text = guide.text("http://example.test")
    for code, meaning in exits.MEANINGS.items():
        assert f"  {code}  {meaning}" in help_text
        assert f"  {code}  {meaning}" in text
    readme = (REPO / "README.md").read_text()
    assert "exits 0 only for a correct result that ranks" in readme
    assert "kbcli/exits.py" in readme


def test_the_readme_says_where_kb_comes_from_and_how_to_install_it_alone():
    readme = (REPO / "README.md").read_text()
    assert "**Where `kb` comes from.**" in readme and "`.venv/bin/kb`" in readme
    assert "pip install ./kbcli" in readme and "'./kbcli[check]'" in readme
    assert "kb guide" in readme


# ---- kb guide -----------------------------------------------------------------------------------

EXAMPLES = {"slug": "level1/901_Small_ReLU", "id": "1", "hardware": "cpu"}


def example(path: str) -> str:
    return path.format(**EXAMPLES)


@pytest.mark.parametrize(("method", "path"), [(m, p) for m, p, _ in guide.ENDPOINTS])
def test_every_endpoint_the_guide_names_is_a_route_that_takes_its_method(method, path):
    match = resolve(example(path))
    assert match.url_name != "api_not_found", path
    view = getattr(match.func, "view_class", None)
    if view is not None:  # a class view: it has a handler for the method
        assert hasattr(view, method.lower()), (method, path)
    else:  # the event stream, a plain function view, is read with GET
        assert method == "GET", (method, path)


def test_the_guide_names_no_other_endpoint_and_the_evaluators_own_names():
    text = guide.text(SITE)
    named = set(re.findall(r"/api/[^\s)`;,]*", text))
    assert named <= {path for _, path, _ in guide.ENDPOINTS}
    assert set(guide.BACKENDS) == set(BACKEND_NAMES)
    assert tuple(guide.VERDICTS) == VERDICTS
    assert {detail: state for detail, (state, _) in guide.RANKING.items()} == {
        str(detail): str(state) for detail, state in RANKING_STATE_OF.items()}
    assert set(guide.RANKING) == {str(detail) for detail in RankingDetail}
    assert set(kb_main.RANKING_LABELS) | {"ranked"} >= set(guide.RANKING)  # kb's words too
    for command in re.findall(r"\bkb (\w+)", text):  # every command it names is kb's
        assert command in CASES, command


def test_the_guide_works_before_login_and_names_the_site_after(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for name in ("KB_URL", "KB_TOKEN", "KB_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    assert kb_main.main(["guide"]) == 0
    out = capsys.readouterr().out
    assert "Site: not logged in: kb login --url URL" in out
    assert "class ModelNew(torch.nn.Module)" in out and "settled: true" in out
    monkeypatch.setenv("KB_URL", "http://kb.example.test/")
    monkeypatch.setenv("KB_TOKEN", "kb_secret")
    assert kb_main.main(["guide"]) == 0
    out = capsys.readouterr().out
    assert "Site: http://kb.example.test (logged in)" in out and "kb_secret" not in out


# ---- the findings -------------------------------------------------------------------------------


def test_a_standing_without_a_rank_prints_a_dash_not_none(kb, world, user, capsys):
    status, _, _ = run(kb, capsys, ["enter", "relu-cup", KERNEL, "--problem", world["slug"],
                                    "--backend", "torch", "--json"])
    assert status == 0
    assert kb(["standings", "relu-cup"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "ada" in line)
    assert row.split()[0] == "-" and "None" not in out


def test_a_test_runs_ranking_line_says_it_once():
    ranking = {"state": "off_board", "detail": "test_run", "rank": None,
               "reason": "A test run: checked for correctness, never ranked. Submit it without "
                         "`test run` to rank."}
    line = kb_main.describe_ranking(ranking)
    assert line == "off board, a test run: never ranked; `kb submit` the same file to rank it"
    assert line.lower().count("a test run") == 1


def test_a_starter_in_a_backend_the_sites_hardware_does_not_run_is_refused(
    kb, world, cpu_hardware, capsys
):
    assert "cuda" not in cpu_hardware.backends
    status, data, err = run(kb, capsys, ["starter", "--problem", world["slug"], "--backend",
                                         "cuda", "--json"])
    assert status == 1 and data["error"]["code"] == "unknown_backend"
    assert data["error"]["allowed"] == sorted(cpu_hardware.backends)
    assert "this site's hardware does not run the cuda backend" in err
    # A backend the site runs, and one it does not know at all (the site's answer: every one).
    assert kb(["starter", "--problem", world["slug"], "--backend", "torch"]) == 0
    assert "class ModelNew" in capsys.readouterr().out
    status, data, _ = run(kb, capsys, ["starter", "--problem", world["slug"], "--backend",
                                       "fortran", "--json"])
    assert status == 1 and set(data["error"]["allowed"]) == set(BACKEND_NAMES)


def test_the_size_limit_is_the_sites_one_figure_in_kb_and_in_the_api(
    kb, world, user, settings, tmp_path, capsys
):
    settings.SUBMISSION_MAX_BYTES = 1000
    api = SchemaCheckedClient().with_token(token_for(user))
    assert api.get("/api/v1/quota/").json()["max_source_bytes"] == 1000
    folder = tmp_path / "kernels"
    folder.mkdir()
    # Over the source's limit, and over the request body's (made from it): one figure.
    for size in (5_000, 100_000):
        big = folder / f"level1_901_Small_ReLU_{size}.py"
        big.write_text(RELU + "#" * size)
        status, data, err = run(kb, capsys, ["submit", str(big), "--problem", world["slug"],
                                             "--backend", "torch", "--json"])
        assert status == 1 and data["error"]["code"] == "too_large"
        assert f"the source is {len(RELU) + size} bytes; the limit is 1000." in err
    status, data, _ = run(kb, capsys, ["submit", str(folder), "--backend", "torch", "--json"])
    assert status == 1 and data["submitted"] == [] and len(data["refused"]) == 2
    assert all(item["error"].endswith("the limit is 1000.") for item in data["refused"])
    assert Submission.objects.count() == 1  # the world's own: kb sent none of them
    # Sent all the same (a client that does not ask first), the site names the same figure.
    for size, detail in ((5_000, "the limit is 1000."), (100_000, "at most 1000 bytes each.")):
        answer = api.post("/api/v1/submissions/", {"problem": world["slug"], "backend": "torch",
                                                   "source": RELU + "#" * size}, format="json")
        assert answer.status_code == 413 and answer.json()["detail"].endswith(detail)
