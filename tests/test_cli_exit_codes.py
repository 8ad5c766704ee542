"""What `kb submit --wait` (and `kb status --wait`, `kb test`) exit with (issue 64): it follows a
submission until it is settled (finished, and no re-verification pending), never exiting at the
verdict of a would-be record; once settled it exits 0 only for a correct result that ranks, or a
correct test run, and 1 for anything else; a wait that runs out first exits 3.

kb runs in this process against this process's site (tests/test_cli_cancel.py's DjangoTransport)
and the runner's services run here too, with the stand-in harness (tests/conftest.py's
`harness`: reference 2.0 ms, so a kernel of `ms` has the speedup 2/ms). kb polls (the test
client has no websockets), and each of its pauses between polls is where the runner moves on.
"""

from collections.abc import Callable

import pytest
from django.contrib.auth import get_user_model

from evaluation.services import runner_heartbeat
from gpu_runner.services import evaluate_submission, reverify_submission
from kbcli import client as kb_client
from kbcli import main as kb_main
from kbcli.client import Client as KbClient
from submissions.models import Submission
from tests.api_support import token_for
from tests.conftest import KERNELS
from tests.leaderboard_factory import make_result
from tests.test_cli_cancel import DjangoTransport

pytestmark = pytest.mark.django_db


@pytest.fixture
def kb(user, monkeypatch):
    """`kb` in this process; it follows by polling, and `between_polls` runs in its pauses."""
    client = KbClient("http://testserver", token_for(user), retries=0)
    client.session.mount("http://", DjangoTransport())
    monkeypatch.setattr(client, "_websocket_events", lambda *args: iter(()))
    monkeypatch.setattr(kb_main, "client_from_config", lambda: client)
    return kb_main.main


@pytest.fixture
def between_polls(monkeypatch) -> list[Callable[[], None]]:
    """Steps the runner takes while kb waits, one per pause of its polling loop (then none)."""
    steps: list[Callable[[], None]] = []
    monkeypatch.setattr(kb_client.time, "sleep", lambda seconds: steps and steps.pop(0)())
    return steps


@pytest.fixture
def runners(cpu_hardware):
    for pid, name in enumerate(("r1", "r2"), start=1):
        runner_heartbeat(name=name, hardware=cpu_hardware, host="host", pid=pid)


@pytest.fixture
def runner_step(django_capture_on_commit_callbacks):
    """One runner step: its service, then what it left for after its commit."""

    def step(service, **kwargs) -> Callable[[], None]:
        def run() -> None:
            with django_capture_on_commit_callbacks(execute=True):
                service(**kwargs)
        return run

    return step


def the_submission() -> Submission:
    """The one kb sent (the latest)."""
    return Submission.objects.order_by("-id").first()


def evaluate(runner_step, runner: str = "r1") -> Callable[[], None]:
    """The submission's first evaluation, once kb has sent it."""
    def run() -> None:
        runner_step(evaluate_submission, submission_id=the_submission().pk, runner_name=runner)()
    return run


def reverify(runner_step, runner: str) -> Callable[[], None]:
    """The next evaluation of the submission's open re-verification."""
    def run() -> None:
        reverification = the_submission().reverifications.first()
        runner_step(reverify_submission, reverification_id=reverification.pk,
                    runner_name=runner)()
    return run


def submit(kb, relu_problem, *extra: str) -> int:
    return kb(["submit", str(KERNELS / "relu_correct.py"), "--problem", relu_problem.slug,
               "--backend", "torch", *extra])


def test_kb_submit_wait_goes_on_past_a_would_be_records_verdict_and_exits_0_once_it_ranks(
    kb, between_polls, runners, runner_step, harness, relu_problem, capsys
):
    harness.will_return(ms=1.0)  # a record on an empty board: re-verified before it ranks
    harness.will_return(ms=1.3)  # 1.54x: apart from 2.0x, a third decides
    harness.will_return(ms=1.15)  # 1.74x: apart from both, it ranks at the slowest
    between_polls += [evaluate(runner_step), reverify(runner_step, "r2"),
                      reverify(runner_step, "r1")]

    assert submit(kb, relu_problem, "--wait") == kb_main.EXIT_OK

    captured = capsys.readouterr()
    err, out = captured.err, captured.out
    assert "finished: correct; ranking pending: re-verification with fresh seeds" in err
    assert "ranking    ranked, #1" in out and "Timing not reproduced" in out
    assert the_submission().is_settled and len(harness.jobs) == 3


def test_kb_submit_wait_that_runs_out_while_the_ranking_is_pending_exits_3(
    kb, between_polls, runners, runner_step, harness, relu_problem, capsys
):
    harness.will_return(ms=1.0)
    between_polls.append(evaluate(runner_step))

    # Correct, but its re-verification has not run: not settled, so not 0 (nor 1).
    assert submit(kb, relu_problem, "--wait", "--timeout", "0.2") == kb_main.EXIT_PENDING

    assert "was not settled within" in capsys.readouterr().err
    submission = the_submission()
    assert submission.verdict == "correct" and not submission.is_settled
    # A look at it says what it is, and exits 0: it was read.
    assert kb(["status", str(submission.pk)]) == kb_main.EXIT_OK
    assert "not settled yet" in capsys.readouterr().out
    # Waiting on it again runs out the same way, until it is settled.
    assert kb(["status", str(submission.pk), "--wait", "--timeout", "0.2"]) == 3


def test_a_queued_submission_that_is_never_run_exits_3_not_1(
    kb, between_polls, relu_problem, cpu_hardware, capsys
):
    assert submit(kb, relu_problem, "--wait", "--timeout", "0.2") == kb_main.EXIT_PENDING
    assert the_submission().status == Submission.Status.QUEUED


def test_kb_submit_wait_exits_1_for_a_correct_result_that_is_held_off_the_board(
    kb, between_polls, runners, runner_step, harness, relu_problem, cpu_hardware, capsys
):
    # Not a record (bob's 0.5 ms is faster), and the judge's clock did not confirm its timing:
    # held, settled at once. Correct, but with no place on the board: not a success.
    bob = get_user_model().objects.create_user(username="bob", password="b-long-passphrase-2")
    make_result(problem=relu_problem, hardware=cpu_hardware, user=bob, ms=0.5)
    harness.will_return(ms=1.0, flags=["timing_unconfirmed"])
    between_polls.append(evaluate(runner_step))

    assert submit(kb, relu_problem, "--wait") == kb_main.EXIT_FAILED

    assert "ranking    held, timing not confirmed" in capsys.readouterr().out
    # Asked again once settled, the same answer.
    assert kb(["status", str(the_submission().pk), "--wait"]) == kb_main.EXIT_FAILED


def test_kb_submit_wait_exits_1_for_a_wrong_result_and_0_for_a_correct_test_run(
    kb, between_polls, runners, runner_step, harness, relu_problem, capsys
):
    harness.will_return(verdict="incorrect")
    between_polls.append(evaluate(runner_step))
    assert submit(kb, relu_problem, "--wait") == kb_main.EXIT_FAILED
    Submission.objects.all().delete()

    # A test run is never ranked, by design: correct is all it can be.
    harness.will_return(ms=1.0)
    between_polls.append(evaluate(runner_step))
    assert kb(["test", str(KERNELS / "relu_correct.py"), "--problem", relu_problem.slug,
               "--backend", "torch"]) == kb_main.EXIT_OK
    assert "ranking    off board, a test run" in capsys.readouterr().out


def test_a_correct_result_that_ranks_behind_its_owners_faster_one_exits_0(
    kb, between_polls, runners, runner_step, harness, relu_problem, cpu_hardware, user, capsys
):
    make_result(problem=relu_problem, hardware=cpu_hardware, user=user, ms=0.5)
    harness.will_return(ms=1.0)  # slower than the owner's own: no record, ranked at once
    between_polls.append(evaluate(runner_step))

    assert submit(kb, relu_problem, "--wait") == kb_main.EXIT_OK
    assert "holds your place" in capsys.readouterr().out


def test_succeeded_is_correct_and_ranked_or_a_correct_test_run():
    ranked = {"verdict": "correct", "ranking": {"state": "ranked"}}
    assert kb_client.succeeded(ranked)
    assert kb_client.succeeded({"verdict": "correct", "test_run": True,
                                "ranking": {"state": "off_board"}})
    for state in ("pending", "held", "off_board"):
        assert not kb_client.succeeded({"verdict": "correct", "ranking": {"state": state}})
    assert not kb_client.succeeded({**ranked, "verdict": "incorrect"})
    assert not kb_client.succeeded({"verdict": None, "status": "cancelled", "test_run": True})
