"""Precision is part of the board: a board is one (problem, hardware, precision).

A kernel judged in another precision than its problem's own (bf16 inputs and reference, a 1e-2
tolerance, for an fp32 problem) ranks on a board of that precision, labelled as such, never on
the problem's own board (its main board), and sets records only there. The API, the pages, the
downloads, the tables, a competition's standings, the live updates and `kb leaderboard` all say
which board they show; the migration that made precision part of the board splits the boards
that mixed them.

The first tests run the runner's services in this process on the real database, as a runner
stores a result (gpu_runner.services.evaluate_submission and reverify_submission), with the
sandboxed child replaced by canned results (tests/conftest.py's FakeHarness); the others store
results as the runner does through tests/leaderboard_factory.py.
"""

import csv
import io
import re
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from competitions.models import Competition
from competitions.services import competition_submit, compute_standings
from evaluation import scoring
from evaluation.services import hardware_register, runner_heartbeat
from gpu_runner.services import evaluate_submission, reverify_submission
from kbcli import main as kb_main
from kbcli.client import ApiError
from kbcli.client import Client as KbClient
from kbsite.asgi import application
from leaderboard import selectors
from leaderboard.models import BestEntry, BoardSummary, ParticipantSummary, Record
from leaderboard.selectors import board_rows, record_rows
from leaderboard.services import boards_rebuild
from problems.models import Problem
from submissions.models import Reverification, Submission
from submissions.services import submission_create
from tests.api_support import SchemaCheckedClient
from tests.conftest import kernel_source
from tests.leaderboard_factory import make_problem, make_result, make_submission

pytestmark = pytest.mark.django_db


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """Call a service, then run what it left for after the commit (task enqueues, events)."""

    def call(service, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return service(**kwargs)

    return call


@pytest.fixture
def bob(db):
    return get_user_model().objects.create_user(username="bob", password="b-long-passphrase-2")


@pytest.fixture
def runners(cpu_hardware):
    for name in ("r1", "r2"):
        runner_heartbeat(name=name, hardware=cpu_hardware, host="host", pid=1)


def evaluated(person, problem, hardware, *, precision, ms, harness, committed) -> Submission:
    """A submission in `precision`, evaluated by runner r1 as `ms` per call."""
    submission = submission_create(
        user=person, problem=problem, source=kernel_source("relu_correct.py"),
        backend="torch", hardware=hardware, precision=precision,
    )
    harness.will_return(ms=ms)
    assert committed(evaluate_submission, submission_id=submission.pk, runner_name="r1") == (
        "correct"
    )
    assert harness.jobs[-1]["precision"] == precision  # judged in the precision it asked for
    submission.refresh_from_db()
    return submission


def reverified(submission, *, ms, harness, committed) -> None:
    """The held would-be record's re-verification, by runner r2, agreeing with the first."""
    reverification = Reverification.objects.get(submission=submission)
    harness.will_return(ms=ms)
    assert committed(
        reverify_submission, reverification_id=reverification.pk, runner_name="r2"
    ) == "passed"


def test_a_bf16_kernel_for_an_fp32_problem_ranks_on_a_bf16_board_not_the_main_one(
    settings, user, bob, cpu_hardware, relu_problem, runners, harness, committed
):
    settings.REVERIFY_NEW_RECORDS = False  # records and their re-verification: the next test
    assert relu_problem.precision == "fp32"
    evaluated(user, relu_problem, cpu_hardware, precision="fp32", ms=1.0,
              harness=harness, committed=committed)
    evaluated(bob, relu_problem, cpu_hardware, precision="bf16", ms=0.5,
              harness=harness, committed=committed)

    # The problem's own board (the default): the fp32 kernel alone, though the bf16 one is
    # twice as fast.
    main = board_rows(problem=relu_problem, hardware=cpu_hardware)
    assert [(r["participant"], r["precision"], r["rank"]) for r in main] == [("ada", "fp32", 1)]
    # The bf16 board: the bf16 kernel alone, first there.
    bf16 = board_rows(problem=relu_problem, hardware=cpu_hardware, precision="bf16")
    assert [(r["participant"], r["precision"], r["rank"]) for r in bf16] == [("bob", "bf16", 1)]
    # Each board its own record.
    assert [r["participant"] for r in record_rows(problem=relu_problem, hardware=cpu_hardware)
            ] == ["ada"]
    assert [r["participant"] for r in record_rows(problem=relu_problem, hardware=cpu_hardware,
                                                  precision="bf16")] == ["bob"]


def test_a_bf16_kernel_slower_than_the_fp32_record_is_still_the_first_record_of_its_board(
    user, bob, cpu_hardware, relu_problem, runners, harness, committed
):
    """A new record is re-verified before it ranks: whether a result is one is asked of its own
    board, so a bf16 kernel neither beats the fp32 record nor slips past its re-verification
    by being slower than it."""
    ada_kernel = evaluated(user, relu_problem, cpu_hardware, precision="fp32", ms=1.0,
                           harness=harness, committed=committed)
    reverified(ada_kernel, ms=1.01, harness=harness, committed=committed)

    bob_kernel = evaluated(bob, relu_problem, cpu_hardware, precision="bf16", ms=2.0,
                           harness=harness, committed=committed)

    assert bob_kernel.reverification == Submission.ReverificationState.PENDING
    assert [r["participant"] for r in board_rows(problem=relu_problem, hardware=cpu_hardware)
            ] == ["ada"]
    reverified(bob_kernel, ms=2.0, harness=harness, committed=committed)
    bf16 = board_rows(problem=relu_problem, hardware=cpu_hardware, precision="bf16")
    assert [(r["participant"], r["rank"], r["candidate_ms"]) for r in bf16] == [("bob", 1, 2.0)]
    assert [r["participant"] for r in board_rows(problem=relu_problem, hardware=cpu_hardware)
            ] == ["ada"]
    assert sorted(Record.objects.values_list("submission_id", "precision")) == [
        (ada_kernel.pk, "fp32"), (bob_kernel.pk, "bf16")]


# ---- stored as the runner stores them (tests/leaderboard_factory.py) ----------------------------

ORIGIN = [(b"origin", b"http://127.0.0.1")]
KERNEL = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass  # {tag}\n"


@pytest.fixture
def gpu(db):
    return hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")


def result_in(precision: str, *, problem, hardware, user=None, **kwargs):
    """A stored result of a new submission judged in `precision`."""
    submission = make_submission(problem=problem, hardware=hardware, user=user)
    Submission.objects.filter(pk=submission.pk).update(precision=precision)
    submission.refresh_from_db()
    return make_result(problem=problem, hardware=hardware, submission=submission, **kwargs)


@pytest.fixture
def two_boards(gpu, user, bob) -> Problem:
    """An fp32 problem on h200: ada's fp32 kernel (1 ms) on its main board, bob's bf16 one
    (0.5 ms, twice as fast) on its bf16 board."""
    problem = make_problem(1, 1)
    result_in("fp32", problem=problem, hardware=gpu, user=user, ms=1.0)
    result_in("bf16", problem=problem, hardware=gpu, user=bob, ms=0.5)
    return problem


def test_the_board_of_a_result_is_the_precision_it_was_judged_in_and_sql_says_the_same(
    two_boards,
):
    row = {"submission__precision": "bf16", "submission__problem_id": 7, "hardware_id": 2}
    assert scoring.board_key(row) == (7, 2, "bf16")
    assert scoring.is_main_board("fp32", "fp32") and not scoring.is_main_board("bf16", "fp32")
    assert scoring.board_label("fp32", "fp32") == "main board (fp32)"
    assert scoring.board_label("bf16", "fp32") == "bf16 board"
    # The one rule in SQL (BoardQuerySet.main_boards) picks the entries the rule does.
    entries = BestEntry.objects.values_list("pk", "precision", "problem__precision")
    assert set(BestEntry.objects.main_boards().values_list("pk", flat=True)) == {
        pk for pk, precision, own in entries if scoring.is_main_board(precision, own)
    }
    assert sorted(BestEntry.objects.values_list("precision", "rank")) == [("bf16", 1), ("fp32", 1)]


def test_the_api_serves_each_board_with_its_precision_the_problems_own_by_default(
    two_boards, bob
):
    api = SchemaCheckedClient()  # every answer checked against the OpenAPI schema
    board = "/api/v1/leaderboard/boards/1/1/h200/"
    main = api.get(board).json()
    assert (main["precision"], main["main_board"], main["board"]) == (
        "fp32", True, "main board (fp32)")
    assert main["problem"]["precision"] == "fp32"
    assert [(r["participant"], r["precision"]) for r in main["rows"]] == [("ada", "fp32")]
    assert [(b["precision"], b["main_board"], b["board"], b["ranked"]) for b in main["boards"]] == [
        ("fp32", True, "main board (fp32)", 1), ("bf16", False, "bf16 board", 1)]

    bf16 = api.get(board, {"precision": "bf16"}).json()
    assert (bf16["precision"], bf16["main_board"], bf16["board"]) == ("bf16", False, "bf16 board")
    assert [(r["rank"], r["participant"], r["precision"]) for r in bf16["rows"]] == [
        (1, "bob", "bf16")]
    assert [(r["participant"], r["board"]) for r in bf16["records"]] == [("bob", "bf16 board")]
    assert api.get(board, {"precision": "fp8"}).status_code == 400

    records = api.get("/api/v1/leaderboard/records/").json()["rows"]
    assert [(r["participant"], r["precision"], r["main_board"]) for r in records] == [
        ("ada", "fp32", True)]
    records = api.get("/api/v1/leaderboard/records/", {"precision": "bf16"}).json()["rows"]
    assert [(r["participant"], r["board"]) for r in records] == [("bob", "bf16 board")]
    entries = api.get(f"/api/v1/leaderboard/users/{bob.username}/").json()["entries"]
    assert [(e["problem"], e["rank"], e["precision"], e["main_board"], e["board"])
            for e in entries] == [(two_boards.slug, 1, "bf16", False, "bf16 board")]


def ranked_in(html: str) -> str:
    """The ranked table of a board page."""
    return html.split('id="board-ranked"', 1)[1].split("</table>", 1)[0]


def csv_rows(response) -> list[dict]:
    assert response.status_code == 200, response.content[:300]
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_pages_show_each_board_apart_and_label_the_other_precisions(two_boards, bob):
    web = Client()
    # The pages by level and number (the older form); their links name the problem by slug.
    main = web.get("/leaderboard/1/1/h200/").content.decode()
    assert ">ada<" in ranked_in(main) and ">bob<" not in ranked_in(main)
    assert 'id="board-label">main board (fp32)<' in main
    assert '<a href="/leaderboard/level1/1_P1/h200/bf16/">bf16 board</a>' in main

    page = web.get("/leaderboard/1/1/h200/bf16/").content.decode()
    assert ">bob<" in ranked_in(page) and ">ada<" not in ranked_in(page)
    assert 'id="board-label">bf16 board<' in page and 'id="other-precision-note"' in page
    assert f'data-ws-path="/ws/boards/{two_boards.pk}/h200/?precision=bf16"' in page
    assert '<a href="/leaderboard/level1/1_P1/h200/">main board (fp32)</a>' in page
    download = web.get("/leaderboard/1/1/h200/bf16/", {"format": "csv", "table": "board"})
    assert download["Content-Disposition"].endswith('-h200-bf16-board.csv"')
    assert [(r["participant"], r["precision"]) for r in csv_rows(download)] == [("bob", "bf16")]
    assert web.get("/leaderboard/1/1/h200/fp8/").status_code == 404

    problem = web.get(two_boards.get_absolute_url()).content.decode()
    assert ('<a href="/leaderboard/level1/1_P1/h200/bf16/" class="other-precision">bf16 board</a>'
            in problem)
    top = problem.split('class="top-results"', 1)[1].split("</table>", 1)[0]
    assert ">ada<" in top and ">bob<" not in top

    person = web.get(f"/leaderboard/users/{bob.username}/").content.decode()
    assert re.search(r'<a href="/leaderboard/level1/1_P1/h200/bf16/">[^<]+</a> <span class="tag '
                     r'board-label other-precision"[^>]*>bf16 board</span>', person)
    entries = web.get(f"/leaderboard/users/{bob.username}/", {"format": "csv"})
    assert [(r["precision"], r["board"], r["rank"]) for r in csv_rows(entries)] == [
        ("bf16", "bf16 board", "1")]

    home = web.get("/leaderboard/", {"hardware": "h200"}).content.decode()
    assert re.search(r'<a href="/leaderboard/level1/1_P1/h200/bf16/">[^<]+</a> <span class="tag '
                     r'board-label other-precision">bf16 board</span>', home)
    boards = web.get("/leaderboard/", {"hardware": "h200", "format": "csv", "table": "boards"})
    assert [(r["precision"], r["board"], r["ranked"]) for r in csv_rows(boards)] == [
        ("fp32", "main board (fp32)", "1"), ("bf16", "bf16 board", "1")]
    records = web.get("/leaderboard/", {"format": "csv", "table": "records"})
    assert [(r["participant"], r["board"]) for r in csv_rows(records)] == [
        ("ada", "main board (fp32)")]


def board_state() -> tuple:
    return (
        sorted(BestEntry.objects.values_list("participant", "precision", "rank",
                                             "candidate_median_ms")),
        sorted(Record.objects.values_list("participant", "precision", "candidate_median_ms")),
        sorted(BoardSummary.objects.values_list("precision", "participants", "ranked")),
        sorted(ParticipantSummary.objects.values_list("participant", "correct")),
    )


def test_the_tables_and_the_solved_marks_count_the_main_board_only(two_boards, gpu, bob):
    assert [(r["user"], r["solved"]) for r in selectors.people_table(hardware=gpu, level=1)] == [
        ("ada", 1)]
    assert selectors.problem_solvers(problem_ids=[two_boards.pk]) == {two_boards.pk: 1}
    assert selectors.problem_status_for(user=bob, problem_ids=[two_boards.pk]) == {
        two_boards.pk: "tried"}
    # A rebuild from the evaluations gives the boards, records and summaries kept as they landed.
    before = board_state()
    boards_rebuild()
    assert board_state() == before

    # A problem whose own precision becomes bf16: that board is its main one now.
    two_boards.precision = Problem.Precision.BF16
    two_boards.save(update_fields=["precision"])
    assert [(r["user"], r["solved"]) for r in selectors.people_table(hardware=gpu, level=1)] == [
        ("bob", 1)]


def test_a_competition_counts_the_problems_own_precision_unless_it_names_others(gpu, user, bob):
    now = timezone.now()
    competition = Competition.objects.create(
        slug="sprint", title="Sprint", hardware=gpu, starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(days=1), published=True,
    )
    problem = make_problem(1, 1)
    competition.problems.set([problem])
    for person, precision, ms in ((user, "fp32", 1.0), (bob, "bf16", 0.5)):
        entry = competition_submit(
            competition=competition, user=person, problem=problem,
            source=KERNEL.format(tag=precision), backend="cuda", precision=precision,
        )
        make_result(problem=problem, hardware=gpu, submission=entry.submission, ms=ms)

    standings = compute_standings(competition)  # names no precision: the problem's own counts
    assert [(r["user"], r["rank"], r["points"]) for r in standings] == [
        ("ada", 1, 1), ("bob", None, 0)]
    competition.precisions = ["fp32", "bf16"]  # says otherwise: both count, side by side
    assert [(r["user"], r["rank"], r["points"]) for r in compute_standings(competition)] == [
        ("bob", 1, 2), ("ada", 2, 1)]


class InProcessClient(KbClient):
    """kb's own client, its requests answered by the site in this process."""

    def __init__(self) -> None:
        super().__init__("http://testserver", "")
        self.api = APIClient()

    def request(self, method: str, path: str, **kwargs) -> dict:
        assert method == "GET", method
        response = self.api.get(path, kwargs.get("params") or {})
        if response.status_code >= 400:
            raise ApiError(response.status_code, response.json())
        return response.json()


def test_kb_leaderboard_shows_the_main_board_or_the_precision_asked_for(
    two_boards, monkeypatch, capsys
):
    monkeypatch.setattr(kb_main, "client_from_config", InProcessClient)
    board = ["leaderboard", "--level", "1", "--number", "1", "--hardware", "h200"]

    assert kb_main.main(board) == 0
    title, header, *rows = capsys.readouterr().out.splitlines()
    assert title == (f"{two_boards.slug} on h200, main board (fp32); also bf16 board "
                     "(1 ranked) (--precision)")
    assert [row.split()[:2] for row in rows if row.strip()] == [["1", "ada"]]

    assert kb_main.main([*board, "--precision", "bf16"]) == 0
    title, header, *rows = capsys.readouterr().out.splitlines()
    assert title == (f"{two_boards.slug} on h200, bf16 board; also main board (fp32) "
                     "(1 ranked) (--precision)")
    assert [row.split()[:2] for row in rows if row.strip()] == [["1", "bob"]]

    assert kb_main.main([*board, "--precision", "fp8"]) != 0
    assert "precision" in capsys.readouterr().err


def board_socket(problem, query: str = "") -> WebsocketCommunicator:
    return WebsocketCommunicator(
        application, f"/ws/boards/{problem.pk}/h200/{query}", headers=ORIGIN
    )


@pytest.mark.django_db(transaction=True)
async def test_a_board_page_hears_of_its_own_precisions_board_only():
    def setup():
        gpu = hardware_register(slug="h200", kind="gpu")
        make = get_user_model().objects.create_user
        ada = make(username="ada", password="a-long-passphrase-1")
        bob = make(username="bob", password="a-long-passphrase-1")
        problem = make_problem(1, 1)
        result_in("fp32", problem=problem, hardware=gpu, user=ada, ms=1.0)
        result_in("bf16", problem=problem, hardware=gpu, user=bob, ms=0.5)
        return gpu, problem, ada, bob

    gpu, problem, ada, bob = await sync_to_async(setup)()
    main, bf16 = board_socket(problem), board_socket(problem, "?precision=bf16")
    assert (await main.connect())[0] and (await bf16.connect())[0]
    snapshot = await main.receive_json_from(timeout=10)
    assert (snapshot["precision"], [r["participant"] for r in snapshot["rows"]]) == (
        "fp32", ["ada"])
    snapshot = await bf16.receive_json_from(timeout=10)
    assert (snapshot["precision"], [r["participant"] for r in snapshot["rows"]]) == (
        "bf16", ["bob"])

    # ada's bf16 kernel, faster than bob's: news for the bf16 board's page, none for the main's.
    await sync_to_async(result_in)("bf16", problem=problem, hardware=gpu, user=ada, ms=0.25)
    change = await bf16.receive_json_from(timeout=10)
    assert (change["type"], change["precision"]) == ("board_change", "bf16")
    assert [key for key, *_ in change["order"]] == [f"user:{ada.pk}", f"user:{bob.pk}"]
    assert await main.receive_nothing(timeout=1)
    await main.disconnect()
    await bf16.disconnect()

    connected, _ = await board_socket(problem, "?precision=fp8").connect()
    assert not connected


LAST_BEFORE = ("leaderboard", "0005_boardsummary")


@pytest.mark.django_db(transaction=True)
@pytest.mark.budget(15)  # reason: loads the migration graph and renders past states twice
def test_the_migration_splits_the_boards_that_mixed_precisions(gpu, user, bob):
    problem = make_problem(1, 1)
    ada_result = result_in("fp32", problem=problem, hardware=gpu, user=user, ms=1.0)
    bob_result = result_in("bf16", problem=problem, hardware=gpu, user=bob, ms=0.5)
    for model in (Record, BestEntry, BoardSummary, ParticipantSummary):
        model.objects.all().delete()
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate([LAST_BEFORE])
    try:
        # The leaderboard as it was: one board a problem and hardware, the bf16 kernel first.
        old = executor.loader.project_state([LAST_BEFORE]).apps
        board = {"problem_id": problem.pk, "hardware_id": gpu.pk}
        for rank, (person, result) in enumerate(((bob, bob_result), (user, ada_result)), 1):
            old.get_model("leaderboard", "BestEntry").objects.create(
                **board, participant=f"user:{person.pk}", user_id=person.pk,
                evaluation_id=result.pk, submission_id=result.submission_id, rank=rank,
                candidate_median_ms=result.candidate_median_ms, reference_median_ms=2.0,
                precision=result.submission.precision, compiled=True, evaluated=1,
            )
        old.get_model("leaderboard", "Record").objects.create(
            **board, participant=f"user:{bob.pk}", user_id=bob.pk, evaluation_id=bob_result.pk,
            submission_id=bob_result.submission_id, candidate_median_ms=0.5,
            achieved_at=bob_result.finished_at,
        )
        old.get_model("leaderboard", "BoardSummary").objects.create(
            **board, participants=2, ranked=2, evaluated=2
        )
    finally:
        executor = MigrationExecutor(connection)  # a fresh graph: the applied set changed
        executor.migrate(latest)

    ada, bob_key = f"user:{user.pk}", f"user:{bob.pk}"
    assert board_state() == (
        sorted([(ada, "fp32", 1, 1.0), (bob_key, "bf16", 1, 0.5)]),
        sorted([(ada, "fp32", 1.0), (bob_key, "bf16", 0.5)]),
        [("bf16", 1, 1), ("fp32", 1, 1)],
        [(ada, 1)],
    )
