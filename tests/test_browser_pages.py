"""Every page of the site in a real browser, at a desktop and a phone width.

The real server (daphne, as the `live_site` fixture starts it, but with DEBUG off and the static
files collected, as `make run` serves the site) on the real test database, and Debian's chromium
through Playwright. Each page is visited as an anonymous visitor, a user and staff, on an
empty site and on a filled one (results, flags, failed kernels, model runs, many runners), at 1280
and 390 px wide. A visit fails on:

- horizontal overflow: the document is wider than the window (`scrollWidth > innerWidth`); wide
  tables must scroll inside their own container, never the page;
- a console error or an uncaught exception in the page;
- a failed request: a response with status >= 400 (other than the 404 page we ask for) or a
  request that did not complete.

A failing visit leaves a full-page screenshot, `<state>-<role>-<width>-<page>.png`, in pytest's
temporary folder of the test (`tmp_path/screenshots`; pytest keeps the last runs' folders under
its basetemp); with the environment variable `KB_SCREENSHOTS` set to a folder (made when
missing), every visit leaves one there, to look the pages over. (A screenshot of every visit
and a 500 ms quiet wait per page took most of these tests' four and a half minutes on two
cores; a page is settled once its requests are answered and 100 ms pass without a new one,
one tab serves every visit, and each page is loaded once and checked at each width.)
The pages come from the URLconfs (kbsite/urls.py and each app's urls.py); the Django admin
(Django's own pages) and the file downloads (CSV, JSON, source) are left out.
"""

import os
import re
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts.models import ApiToken
from accounts.services import api_token_create
from competitions.models import Competition
from competitions.services import competition_submit
from evaluation.models import Runner
from evaluation.services import hardware_register
from problems.models import Baseline
from submissions.models import Evaluation, Submission
from submissions.runs.models import Model, Run
from tests.conftest import REPO, process_env, start_daphne, stop_process
from tests.leaderboard_factory import make_problem, make_result, make_submission

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

WIDTHS = (1280, 390)
PASSWORD = "a-long-passphrase-1"
LONG_NAME = "Conv3d_GroupNorm_Mean_Softplus_Tanh_Multiply_BatchNorm_Sum_Residual_Add"


def screenshot_dir(tmp_path: Path) -> Path:
    folder = Path(os.environ["KB_SCREENSHOTS"]) if os.environ.get("KB_SCREENSHOTS") else (
        tmp_path / "screenshots"
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def every_visit_shot() -> bool:
    return bool(os.environ.get("KB_SCREENSHOTS"))


# ---- the site as `make run` serves it ------------------------------------------------------------


@pytest.fixture(scope="module")
def production_var(tmp_path_factory) -> Path:
    """A var/ folder with the static files collected, as `make run` has it (DEBUG off)."""
    var = tmp_path_factory.mktemp("var")
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=REPO, env=_production_env(var), check=True, capture_output=True,
    )
    return var


def _production_env(var: Path) -> dict[str, str]:
    return process_env(
        DEBUG="0", KBSITE_VAR_DIR=str(var), SECRET_KEY="page-test-key-" + "x" * 40,
        ALLOWED_HOSTS="127.0.0.1,localhost", SECURE_COOKIES="0",
    )


@pytest.fixture(scope="module")
def site_url(production_var, django_db_setup):
    """The real ASGI server (daphne) with DEBUG off: the site's own 404 page, whitenoise's
    static files, the production content security policy; on this run's database. One for the
    module's tests: each fills the database itself (transactional tests), the server only reads
    it."""
    process, url = start_daphne(production_var / "daphne.log", _production_env(production_var))
    yield url
    stop_process(process)


# ---- the two states of the site ----------------------------------------------------------------


def fill_empty(sample_problems) -> dict:
    """A new site: the sample problems and one hardware, and nothing done with them yet.

    A model with a run that has not started and one queued submission, so that the pages of one
    such thing can be visited in their empty state too.
    """
    cpu = hardware_register(slug="cpu", name="CPU", kind="cpu", backends=["torch", "cpp"])
    users = _users()
    relu = sample_problems["level1/901_Small_ReLU"]
    llm = Model.objects.create(litellm_name="openai/gpt-test", display_name="GPT Test")
    run = Run.objects.create(name="first-sweep", model=llm, hardware=cpu)
    run.problems.add(relu)
    # A competition running on the site's hardware, nobody entered yet.
    now = timezone.now()
    sprint = Competition.objects.create(
        slug="cpu-sprint", title="CPU sprint: the small problems", hardware=cpu,
        backends=["torch", "cpp"], precisions=["fp32"], starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(days=2), daily_limit=5, published=True,
        description="Make the sample problems fast on a CPU.",
    )
    sprint.problems.set(sample_problems.values())
    queued = Submission.objects.create(
        user=users["user"],
        problem=relu,
        problem_version=relu.current_version,
        hardware=cpu,
        backend="torch",
        source="import torch\n",
        source_hash="0" * 64,
        status=Submission.Status.QUEUED,
    )
    return {
        "problem": relu,
        "hardware": cpu,
        "model": llm,
        "run": run,
        "submissions": {"queued": queued},
        "username": users["user"].username,
        "competition": sprint,
    }


def fill_busy(sample_problems) -> dict:
    """A site in use: ranked results, flagged and failed kernels, model runs, many runners."""
    site = fill_empty(sample_problems)
    cpu, relu, llm, run = site["hardware"], site["problem"], site["model"], site["run"]
    gpu = hardware_register(
        slug="h200", name="NVIDIA H200 141GB HBM3e", kind="gpu", arch="sm_90", gpu_count=8,
        backends=["cuda", "triton", "cpp", "torch"], torch_version="2.13.0",
        cuda_version="12.8", triton_version="3.6.0", driver_version="570.124.06",
    )
    User = get_user_model()
    ada = User.objects.get(username="ada")
    others = [
        User.objects.create_user(username=name, password=PASSWORD)
        for name in ("bob", "a_person_with_a_rather_long_username_indeed")
    ]
    long_llm = Model.objects.create(
        litellm_name="openrouter/deepseek/deepseek-r1-distill-qwen-32b-instruct-preview",
        display_name="DeepSeek R1 Distill Qwen 32B Instruct (preview)",
    )
    run.status = Run.Status.FINISHED
    run.prompt_tokens, run.completion_tokens, run.cost_usd = 123_456, 654_321, 12.3456
    run.save()
    long_problem = make_problem(2, 76)
    long_problem.name = LONG_NAME
    long_problem.slug = f"level2/76_{LONG_NAME}"
    long_problem.save()
    problems = [relu, long_problem, *(make_problem(1, n) for n in range(30, 34))]
    for hardware in (cpu, gpu):
        for mode, ms in (("eager", 2.0), ("compile", 1.5)):
            Baseline.objects.create(problem=relu, hardware=hardware, mode=mode, median_ms=ms,
                                    torch_version="2.13.0")
    ranked = None
    for index, problem in enumerate(problems):
        for hardware in (cpu, gpu):
            ranked = make_result(problem=problem, hardware=hardware, user=ada, ms=1.0 + index,
                                 speedup_compile=1.3)
            make_result(problem=problem, hardware=hardware, user=others[0], ms=3.0 + index)
            make_result(problem=problem, hardware=hardware, user=others[1], ms=0.5 + index)
            make_result(problem=problem, hardware=hardware, model=llm, run=run, ms=1.7 + index,
                        speedup_compile=0.8)
            make_result(problem=problem, hardware=hardware, model=long_llm, ms=0.9 + index)
    make_result(problem=relu, hardware=cpu, user=others[0], ms=0.001,
                flags=("timing_underreported", "output_aliases_input"))
    compile_error = make_result(problem=relu, hardware=cpu, user=ada, verdict="compile_error",
                                ms=None)
    incorrect = make_result(
        problem=relu, hardware=cpu, user=ada, verdict="incorrect", ms=5.0,
        trials=[{"k": 1, "passed": False, "max_abs_diff": 0.123456789012345678,
                 "mean_abs_diff": 0.0123456789012345678, "reason": "output mismatch"}],
    )
    running = make_submission(problem=long_problem, hardware=gpu, user=ada)
    Submission.objects.filter(pk=running.pk).update(
        status=Submission.Status.RUNNING, started_at=timezone.now(),
        progress={"type": "trial", "k": 2, "n": 5},
    )
    for n in range(30):
        make_submission(problem=problems[n % len(problems)], hardware=gpu, user=ada,
                        backend=("cuda", "triton", "cpp", "torch")[n % 4])
    # Entries in the competition: ranked, failed and waiting ones from three people.
    sprint = site["competition"]
    for person, ms in ((ada, 2.0), (others[0], 1.0), (others[1], None)):
        for problem in (relu, sample_problems["level1/902_Small_Matmul"]):
            entry = competition_submit(competition=sprint, user=person, problem=problem,
                                       source=f"class ModelNew:\n    pass  # {person.username}\n",
                                       backend="torch")
            make_result(problem=problem, hardware=cpu, submission=entry.submission, ms=ms,
                        verdict="correct" if ms else "compile_error")
    Competition.objects.create(
        slug="h200-winter-cup-with-a-long-name", title=f"H200 winter cup: {LONG_NAME}",
        hardware=gpu, starts_at=timezone.now() - timedelta(days=30),
        ends_at=timezone.now() - timedelta(days=2), published=True,
    ).problems.set([long_problem])
    for name in ("laptop", "ci-runner-with-a-long-descriptive-name"):
        api_token_create(user=ada, name=name, scopes=["read", "submit"])
    ApiToken.objects.filter(name="laptop").update(last_used_at=timezone.now())
    # Runners: two online (their heartbeat is ahead of the test's duration) and many left
    # offline by restarts, as on a host that restarted its runners all day.
    later = timezone.now() + timedelta(hours=1)
    for index in range(2):
        Runner.objects.create(name=f"gpu-host-01.example.org:gpu{index}", hardware=gpu,
                              host="gpu-host-01.example.org", device_index=index,
                              last_seen=later, current_submission_id=running.pk if not index
                              else None, evaluations_done=40 + index)
    for index in range(12):
        Runner.objects.create(name=f"gpu-host-01.example.org:{4000 + index}", hardware=gpu,
                              host="gpu-host-01.example.org", pid=4000 + index,
                              last_seen=timezone.now() - timedelta(hours=index + 1))
    Runner.objects.create(name="cpu-host:cpu:1", hardware=cpu, host="cpu-host",
                          last_seen=timezone.now() - timedelta(days=2))
    # The submission keeps its last evaluation's verdict, as Submission.mark_finished does.
    for evaluation in Evaluation.objects.order_by("attempt"):
        Submission.objects.filter(pk=evaluation.submission_id).update(
            verdict=evaluation.verdict, finished_at=evaluation.finished_at
        )
    site["submissions"].update(
        {
            "correct": ranked.submission,
            "compile_error": compile_error.submission,
            "incorrect": incorrect.submission,
            "running": running,
        }
    )
    site["long_problem"] = long_problem
    return site


def _users() -> dict:
    User = get_user_model()
    return {
        "user": User.objects.create_user(username="ada", password=PASSWORD),
        "staff": User.objects.create_user(username="root", password=PASSWORD, is_staff=True,
                                          is_superuser=True),
    }


# ---- the pages ---------------------------------------------------------------------------------


def pages(site: dict) -> list[tuple[str, str]]:
    """(name, path) of every page to visit, from the URLconfs."""
    problem, hardware = site["problem"], site["hardware"]
    listed = [
        ("home", "/"),
        ("problems", "/problems/"),
        ("problem", f"/problems/{problem.level}/{problem.number}/"),
        ("leaderboards", "/leaderboard/"),
        ("board", f"/leaderboard/{problem.level}/{problem.number}/{hardware.slug}/"),
        ("leaderboard-model", f"/leaderboard/models/{site['model'].pk}/"),
        ("leaderboard-run", f"/leaderboard/runs/{site['run'].pk}/"),
        ("leaderboard-user", f"/leaderboard/users/{site['username']}/"),
        ("leaderboard-people", "/leaderboard/people/"),
        ("competitions", "/competitions/"),
        ("competition", f"/competitions/{site['competition'].slug}/"),
        ("competition-person", f"/competitions/{site['competition'].slug}/people/ada/"),
        ("submissions", "/submissions/"),
        ("submit", f"/submissions/new/?problem={problem.pk}"),
        ("runs", "/runs/"),
        ("run", f"/runs/{site['run'].pk}/"),
        ("hardware", "/hardware/"),
        ("profile", "/accounts/profile/"),
        ("login", "/accounts/login/"),
        ("signup", "/accounts/signup/"),
        ("api-docs", "/api/docs/"),
        ("not-found", "/no-such-page/"),
    ]
    for label, submission in site["submissions"].items():
        listed.append((f"submission-{label}", f"/submissions/{submission.pk}/"))
    if "correct" in site["submissions"]:
        a, b = site["submissions"]["correct"].pk, site["submissions"]["incorrect"].pk
        listed.append(("compare", f"/leaderboard/compare/?a={a}&b={b}"))
    if "long_problem" in site:
        p = site["long_problem"]
        listed.append(("problem-long", f"/problems/{p.level}/{p.number}/"))
        listed.append(("board-long", f"/leaderboard/{p.level}/{p.number}/h200/"))
    return listed


class Visit:
    """One page in the context's tab, with what went wrong while it loaded. The tab is the
    same from visit to visit (a new one cost a fifth of these tests' time); each visit listens
    from before its page is asked for until the tab has left it for a blank page."""

    def __init__(self, page, base: str, *, allow_404: bool = False) -> None:
        self.base = base
        self.allow_404 = allow_404
        self.problems: list[str] = []
        self.recording = True
        self.in_flight: set = set()
        self.shot: Path | None = None
        self.reported = 0  # problems already answered for an earlier width
        self.page = page
        self.listeners = {
            "console": self._console,
            "pageerror": lambda error: self._note(f"uncaught exception: {error}"),
            "response": self._response,
            "request": lambda request: self.in_flight.add(request),
            "requestfinished": lambda request: self.in_flight.discard(request),
            "requestfailed": self._failed,
        }
        for event, listener in self.listeners.items():
            page.on(event, listener)

    def _note(self, text: str) -> None:
        if self.recording:
            self.problems.append(text)

    def _console(self, message) -> None:
        if message.type != "error":
            return
        # Chrome also logs the 404 page we asked for as a failed resource.
        if (
            self.allow_404
            and "status of 404" in message.text
            and message.location.get("url") == self.page.url
        ):
            return
        self._note(f"console error: {message.text}")

    def _response(self, response) -> None:
        if response.status < 400:
            return
        if (
            self.allow_404
            and response.status == 404
            and response.request.resource_type == "document"
        ):
            return
        self._note(f"{response.status} for {response.url}")

    def _failed(self, request) -> None:
        self.in_flight.discard(request)
        self._note(f"request failed: {request.url} ({request.failure})")

    def settle(self, *, quiet_ms: int = 100, limit_s: float = 10.0) -> None:
        """Loaded, every request answered, and none new for `quiet_ms` (Playwright's
        "networkidle" waits 500 ms a page, most of these tests' time)."""
        self.page.wait_for_load_state("load")
        deadline = time.monotonic() + limit_s
        quiet_since = None
        while time.monotonic() < deadline:
            if self.in_flight:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif (time.monotonic() - quiet_since) * 1000 >= quiet_ms:
                return
            self.page.wait_for_timeout(25)  # lets Playwright deliver the request events
        self._note(f"requests still open after {limit_s:.0f} s: "
                   + ", ".join(sorted(r.url for r in self.in_flight))[:300])

    def at_width(self, width: int, *, shot: Path) -> list[str]:
        """What went wrong at `width` px wide: the window narrowed (or widened) to it on the
        loaded page, its layout checked; the first width's answer holds what its load raised,
        a later one's only what came up since."""
        if (self.page.viewport_size or {}).get("width") != width:
            self.recording = True
            self.page.set_viewport_size({"width": width, "height": 900})
            # A frame for resize handlers (the charts redraw) before the layout is read.
            self.page.evaluate("() => new Promise(done => requestAnimationFrame(() => done()))")
        widths = self.page.evaluate(
            "() => [document.documentElement.scrollWidth, window.innerWidth]"
        )
        if widths[0] > widths[1]:
            wide = self.page.evaluate(WIDEST_ELEMENTS)
            self._note(f"horizontal overflow: {widths[0]} px wide at {widths[1]} px ({wide})")
        self.shot = shot
        if every_visit_shot():
            self.page.screenshot(path=str(shot), full_page=True)
        self.recording = False  # what the page checks' clicks raise is theirs to judge
        found, self.reported = self.problems[self.reported:], len(self.problems)
        return found

    def check(self, *, shot: Path) -> list[str]:
        self.settle()
        return self.at_width((self.page.viewport_size or {}).get("width", WIDTHS[0]), shot=shot)

    def shoot_failing(self, found: list[str]) -> None:
        """The screenshot of a failing visit, unless every visit has one already."""
        if found and not every_visit_shot():
            self.page.screenshot(path=str(self.shot), full_page=True)

    def close(self) -> None:
        self.recording = False  # what leaving the page aborts is not the page's fault
        self.page.goto("about:blank")
        for event, listener in self.listeners.items():
            self.page.remove_listener(event, listener)


# Which elements stick out past the window: named in the failure, to find the culprit at once.
WIDEST_ELEMENTS = """() => {
  const w = window.innerWidth, out = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.right > w + 1 && r.width > 0) {
      let inScroller = false;
      for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
        const s = getComputedStyle(p).overflowX;
        if (s === 'auto' || s === 'scroll' || s === 'hidden') { inScroller = true; break; }
      }
      if (!inScroller) {
        const cls = typeof el.className === 'string' && el.className
          ? '.' + el.className.split(' ').join('.') : '';
        out.push(el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + cls +
                 ' right=' + Math.round(r.right));
      }
    }
  }
  return out.slice(0, 5).join(', ');
}"""


# What some pages must show, beyond fitting and loading cleanly: {page: check(page, state)}, each
# returning what is wrong.
def _texts(page, selector: str) -> list[str]:
    return [text.strip() for text in page.locator(selector).all_text_contents()]


def _check_every_page(page, state: str) -> list[str]:
    wrong = []
    if page.url.endswith("/api/docs/"):
        if page.locator("header a[href='/']").count() == 0:
            wrong.append("the API docs have no way back to the site")
    elif page.locator("header nav a[href='/api/docs/']").count() != 1:
        wrong.append("the navigation has no link to the API docs")
    if page.locator("link[rel=icon]").count() != 1:
        wrong.append("no favicon")
    return wrong


def _check_charts(page, state: str) -> list[str]:
    wrong = []
    titles = _texts(page, "figure.chart svg > title")
    wrong += [f"chart title {t!r} ends in a comma" for t in titles if t.endswith(",")]
    if state == "empty" and page.locator("figure.chart").count():
        wrong.append("an empty site shows chart boxes")
    if state == "filled" and not titles:
        wrong.append("no charts on a filled site")
    return wrong


def _check_hardware(page, state: str) -> list[str]:
    if state != "filled":
        return []
    gpu = page.locator("#hardware-h200")
    wrong = []
    if gpu.locator("table.runners td.online").count() != 2:
        wrong.append("the two online runners are not listed")
    summary = gpu.locator("details.offline-runners summary")
    if summary.count() != 1 or "12 offline runners" not in summary.text_content():
        wrong.append("the 12 offline runners are not counted and folded away")
    elif gpu.locator("details.offline-runners").get_attribute("open") is not None:
        wrong.append("the offline runners are not folded away")
    return wrong


def _check_verdict(expected: str):
    def check(page, state: str) -> list[str]:
        shown = page.text_content("#verdict").strip()
        return [] if shown == expected else [f"verdict reads {shown!r}, not {expected!r}"]

    return check


def _check_running(page, state: str) -> list[str]:
    status, progress = page.text_content("#status").strip(), page.text_content("#progress")
    wrong = [] if status == "running" else [f"status reads {status!r}"]
    if "trial 2 of 5" not in progress:
        wrong.append(f"progress reads {progress!r}, not the trial")
    if "running for" not in page.text_content("#elapsed"):
        wrong.append("no elapsed time")
    return wrong


def _check_submit(page, state: str) -> list[str]:
    """Backends by their names, only those some hardware runs; the only hardware chosen."""
    labels = set(_texts(page, "#submission-form select[name=backend] option"))
    expected = {"CUDA", "C++", "Triton", "PyTorch"} if state == "filled" else {"C++", "PyTorch"}
    wrong = [] if labels == expected else [f"backends offered as {sorted(labels)}"]
    chosen = page.eval_on_selector("#submission-form select[name=hardware]", "s => s.value")
    if state == "empty" and chosen != "cpu":
        wrong.append(f"the only hardware is not chosen ({chosen!r})")
    return wrong + _check_code_editor(page)


def _check_code_editor(page) -> list[str]:
    """The code field is the CodeMirror editor (submissions.forms.CodeEditor), with the starter."""
    if page.locator("#id_source-editor.CodeMirror").count() != 1:
        return ["the code field is not a code editor"]
    if page.locator("#id_source").is_visible():
        return ["the plain textarea shows beside the editor"]
    return []


def _check_competition(page, state: str) -> list[str]:
    rows = page.locator("#standings-table tbody tr[data-key]").count()
    # Filled: ada and bob rank, the third entrant's kernels failed (listed with no points).
    wrong = [] if rows == (3 if state == "filled" else 0) else [f"{rows} rows in the standings"]
    if page.locator("#entry-form").count():
        wrong += _check_code_editor(page)
    return wrong


def _check_boards_hardware(page, state: str) -> list[str]:
    """A board lands on the hardware with the most results (the only one on an empty site)."""
    chosen = page.eval_on_selector("form.filters select[name=hardware]", "s => s.value")
    return [] if chosen == "cpu" else [f"the hardware chosen is {chosen!r}, not cpu"]


PAGE_CHECKS = {
    "leaderboards": _check_charts,
    "leaderboard-model": _check_charts,
    "hardware": _check_hardware,
    "submission-compile_error": _check_verdict("compile error"),
    "submission-running": _check_running,
    "submit": _check_submit,
    "competition": _check_competition,
    "leaderboard-people": _check_boards_hardware,
}


def log_in(context, base: str, username: str) -> None:
    page = context.new_page()
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(f"{base}/")
    page.close()


def visit_all(browser, base: str, site: dict, *, state: str, role: str, folder: Path) -> dict:
    """Visit every page, loaded once and checked at every width (the window narrowed on the
    loaded page: the layout answers to the width, and a second load of each page was half these
    tests' time); return {visit name: [problems]} for the failing ones."""
    failures: dict[str, list[str]] = {}
    visited = 0
    user = "ada" if role == "user" else "root"
    context = browser.new_context(viewport={"width": WIDTHS[0], "height": 900})
    try:
        if role != "anonymous":
            log_in(context, base, user)
        tab = context.new_page()
        for name, path in pages(site):
            tab.set_viewport_size({"width": WIDTHS[0], "height": 900})
            visit = Visit(tab, base, allow_404=name == "not-found")
            try:
                answer = tab.goto(base + path)
                if name == "not-found":
                    assert answer.status == 404, f"{path} answered {answer.status}"
                visit.settle()
                for width in WIDTHS:
                    shot = folder / f"{state}-{role}-{width}-{name}.png"
                    found = visit.at_width(width, shot=shot)
                    found += _check_every_page(tab, state)
                    check = PAGE_CHECKS.get(name)
                    if check and not (name == "submit" and role == "anonymous"):
                        found += check(tab, state)
                    visit.shoot_failing(found)
                    visited += 1
                    if found:
                        failures[f"{name} at {width} px"] = found
            finally:
                visit.close()
        if role != "anonymous":
            for n, width in enumerate(WIDTHS):
                tab.set_viewport_size({"width": width, "height": 900})
                if n:
                    log_in(context, base, user)  # the last width's visit logged out
                found = _token_and_logout(tab, base, folder, f"{state}-{role}-{width}")
                visited += 2
                for key, value in found.items():
                    failures[f"{key} at {width} px"] = value
    finally:
        context.close()
    return {"failures": failures, "visited": visited}


def _token_and_logout(tab, base: str, folder: Path, prefix: str) -> dict:
    """The page a new API token is shown on, and the page after logging out."""
    failures = {}
    visit = Visit(tab, base)
    try:
        visit.page.goto(f"{base}/accounts/profile/")
        visit.page.fill("#token-form input[name=name]", "from-the-page-test")
        visit.page.click("#token-form button[type=submit]")
        visit.page.wait_for_selector("#new-token-key")
        found = visit.check(shot=folder / f"{prefix}-token-created.png")
        visit.shoot_failing(found)
    finally:
        visit.close()
    if found:
        failures["token-created"] = found
    visit = Visit(tab, base)
    try:
        visit.page.goto(f"{base}/")
        visit.page.click("header form[action$='/logout/'] button")
        visit.page.wait_for_url(f"{base}/")
        found = visit.check(shot=folder / f"{prefix}-logged-out.png")
        messages = visit.page.locator(".messages")
        message = messages.text_content() if messages.count() else ""
        if "logged out" not in message.lower():
            found.append(f"no message after logging out (messages: {message!r})")
        visit.shoot_failing(found)
    finally:
        visit.close()
    if found:
        failures["logged-out"] = found
    return failures


# ---- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["anonymous", "user", "staff"])
def test_every_page_of_an_empty_site_fits_a_phone_and_a_desktop_without_errors(
    browser, site_url, sample_problems, tmp_path, role
):
    """Slow: layout overflow, console errors and failed requests exist only in a real browser on
    the real server (DEBUG off, collected static files)."""
    site = fill_empty(sample_problems)
    result = visit_all(browser, site_url, site, state="empty", role=role,
                       folder=screenshot_dir(tmp_path))
    assert result["visited"] >= len(pages(site)) * len(WIDTHS)
    assert not result["failures"], _report(result["failures"])


@pytest.mark.parametrize("role", ["anonymous", "user", "staff"])
def test_every_page_of_a_busy_site_fits_a_phone_and_a_desktop_without_errors(
    browser, site_url, sample_problems, tmp_path, role
):
    """Slow: layout overflow, console errors and failed requests exist only in a real browser on
    the real server (DEBUG off, collected static files)."""
    site = fill_busy(sample_problems)
    result = visit_all(browser, site_url, site, state="filled", role=role,
                       folder=screenshot_dir(tmp_path))
    assert result["visited"] >= len(pages(site)) * len(WIDTHS)
    assert not result["failures"], _report(result["failures"])


def _report(failures: dict) -> str:
    lines = [f"{len(failures)} visit(s) failed:"]
    for name, found in failures.items():
        lines.append(f"- {name}:")
        lines.extend("    " + re.sub(r"\s+", " ", item)[:400] for item in found)
    return "\n".join(lines)


def test_the_submission_page_shows_live_progress_trial_by_trial_and_the_time_taken(
    browser, site_url, sample_problems
):
    """The events a runner sends while it evaluates (kbsite.live.publish of the status payload,
    as gpu_runner.services does) move the page along: the status word never goes blank, the
    trials count up with a bar, the elapsed time runs, and the verdict reads as words."""
    from playwright.sync_api import expect

    from kbsite.live import publish, submission_group
    from submissions.selectors import submission_status_payload

    site = fill_empty(sample_problems)
    submission = site["submissions"]["queued"]

    def send(kind: str, **changes) -> None:
        Submission.objects.filter(pk=submission.pk).update(**changes)
        submission.refresh_from_db()
        publish(submission_group(submission.pk),
                {"type": kind, **submission_status_payload(submission)})

    page = browser.new_page(viewport={"width": 390, "height": 900})
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{site_url}/submissions/{submission.pk}/")
    expect(page.locator("#status")).to_have_text("queued")
    page.evaluate("window.__sameDocument = true")

    send("progress", status=Submission.Status.RUNNING, started_at=timezone.now(),
         progress={"type": "phase", "phase": "compiling"})
    expect(page.locator("#status")).to_have_text("running", timeout=15_000)
    # A PyTorch kernel has nothing to compile: its load reads "loading" (live.js).
    expect(page.locator("#progress")).to_have_text(
        "loading" if submission.backend == "torch" else "compiling")
    expect(page.locator("#elapsed")).to_contain_text("running for")
    for k in (1, 3):
        send("progress", progress={"type": "trial", "k": k, "n": 5})
        expect(page.locator("#progress")).to_have_text(f"trial {k} of 5", timeout=15_000)
        assert page.text_content("#status") == "running"
        assert page.locator("#progress-bar").is_visible()
        assert page.eval_on_selector("#progress-bar", "bar => [bar.value, bar.max]") == [k, 5]
    send("progress", progress={"type": "phase", "phase": "timing"})
    expect(page.locator("#progress")).to_have_text("timing", timeout=15_000)
    assert page.locator("#progress-bar").is_hidden()

    evaluation = make_result(problem=submission.problem, hardware=submission.hardware,
                             submission=submission, verdict="compile_error", ms=None)
    submission.mark_finished(verdict=evaluation.verdict)
    send("status")
    expect(page.locator("#verdict")).to_have_text("compile error", timeout=15_000)
    expect(page.locator("#status")).to_have_text("finished")
    expect(page.locator("#progress")).to_have_text("")
    expect(page.locator("#elapsed")).to_contain_text("took")
    assert page.evaluate("window.__sameDocument") is True
    assert errors == []
    page.close()


def test_the_start_page_shows_a_new_result_without_a_reload(browser, site_url, sample_problems):
    """Slow: a real browser sees the start page change through its websocket, without a reload."""
    from playwright.sync_api import expect

    site = fill_empty(sample_problems)
    page = browser.new_page()
    page.goto(f"{site_url}/")
    expect(page.locator("#recent-results tbody tr.empty")).to_have_count(1)
    page.evaluate("window.__sameDocument = true")

    evaluation = make_result(problem=site["problem"], hardware=site["hardware"],
                             user=get_user_model().objects.get(username="ada"),
                             verdict="compile_error", ms=None)
    evaluation.submission.mark_finished(verdict=evaluation.verdict)

    row = page.locator("#recent-results tbody tr").first
    expect(row).to_contain_text(f"#{evaluation.submission_id}", timeout=30_000)
    expect(row).to_contain_text("compile error")
    assert row.locator("a[href='/leaderboard/users/ada/']").count() == 1
    assert page.evaluate("window.__sameDocument") is True
    page.close()
