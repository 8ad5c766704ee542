"""Exploits and notes are kept apart (evaluator/flags.py): a library+epilogue kernel
whose own kernels do a tiny share ranks with its share noted; a pure-copy wrapper never ranks
above the plain PyTorch result; only exploits are listed as exploits; a run's tables give
KernelBench's counting beside the strict one."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from evaluation.services import hardware_register
from leaderboard.selectors import board_rows, flagged_rows
from leaderboard.services import board_refresh_for
from submissions.models import Evaluation
from submissions.runs.models import Model, Run
from submissions.runs.selectors import run_fast_p
from tests.api_support import SchemaCheckedClient, token_for
from tests.leaderboard_factory import make_problem, make_result

pytestmark = pytest.mark.django_db

TINY_SHARE = {"checks": {"backend": {"backend": "triton", "share": 0.0005,
                                     "basis": "device time", "own_calls": 1,
                                     "not_used": False, "minor": True}}}


@pytest.fixture
def gpu(db):
    return hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")


@pytest.fixture
def people(db):
    make = get_user_model().objects.create_user
    return {n: make(username=n, password="a-long-passphrase-1")
            for n in ("ada", "bob", "cy", "eve")}


def with_report(evaluation: Evaluation, report: dict) -> Evaluation:
    Evaluation.objects.filter(pk=evaluation.pk).update(static_report=report)
    evaluation.refresh_from_db()
    return evaluation


def test_a_pure_copy_wrapper_ranks_no_higher_than_the_plain_pytorch_result(gpu, people):
    problem = make_problem(2, 76)
    # Plain PyTorch, a little faster than the reference timed beside it (2.0 ms).
    make_result(problem=problem, hardware=gpu, user=people["ada"], ms=1.9)
    # The copy wrapper measured "faster" (noise, or a cheaper PyTorch call): 1.0 ms.
    copy = make_result(problem=problem, hardware=gpu, user=people["bob"], ms=1.0,
                       flags=("backend_share_small",))
    assert copy.ranks is True
    rows = board_rows(problem=problem, hardware=gpu)
    assert [r["participant"] for r in rows] == ["ada", "bob"]
    # It stands as no faster than the reference: the reference's median, speedup 1.
    assert rows[1]["candidate_ms"] == 2.0 and rows[1]["speedup"] == 1.0
    assert flagged_rows(problem=problem, hardware=gpu) == []


def test_a_library_plus_epilogue_kernel_ranks_with_its_share_noted_on_page_and_api(gpu, people):
    problem = make_problem(2, 86)
    fused = with_report(make_result(problem=problem, hardware=gpu, user=people["cy"], ms=1.5,
                                    flags=("backend_share_small",)), TINY_SHARE)
    board_refresh_for(fused)
    [row] = board_rows(problem=problem, hardware=gpu)
    assert row["participant"] == "cy" and row["rank"] == 1

    html = Client().get(f"/submissions/{fused.submission_id}/").content.decode()
    notes = html.split('id="notes"')[1].split("</ul>")[0]
    assert "Your Triton kernels do 0.05% of the device time" in notes
    assert 'id="flags"' not in html  # no exploit list

    client = SchemaCheckedClient().with_token(token_for(people["cy"]))
    data = client.get(f"/api/v1/submissions/{fused.submission_id}/").json()
    assert data["flags"] == []
    assert [n["name"] for n in data["notes"]] == ["backend_share_small"]
    assert data["notes"][0]["text"].startswith("Your Triton kernels do 0.05% of the device time")
    assert data["ranking"]["state"] == "ranked"


def test_only_exploits_are_listed_as_exploits_on_the_board_and_the_page(gpu, people):
    problem = make_problem(1, 19)
    make_result(problem=problem, hardware=gpu, user=people["ada"], ms=1.0)
    not_used = make_result(problem=problem, hardware=gpu, user=people["eve"], ms=0.5,
                           flags=("backend_not_used", "backend_share_small"))
    make_result(problem=problem, hardware=gpu, user=people["bob"], ms=0.9,
                flags=("timing_unconfirmed",))
    make_result(problem=problem, hardware=gpu, user=people["cy"], ms=1.1,
                flags=("timing_not_reproduced",))
    [flagged] = flagged_rows(problem=problem, hardware=gpu)
    assert (flagged["participant"], flagged["flags"]) == ("eve", ["backend_not_used"])
    # A timing the judge did not confirm holds; one that did not reproduce ranks (at its
    # slowest evaluation's figure, which is what a re-verification stores).
    assert [r["participant"] for r in board_rows(problem=problem, hardware=gpu)] == [
        "ada", "cy"]
    board = Client().get("/leaderboard/1/19/h200/").content.decode()
    exploits = board.split('id="board-flagged"')[1].split("</table>")[0]
    assert "timing_not_reproduced" not in exploits and "backend_share_small" not in exploits
    assert "timing_unconfirmed" not in exploits

    page = Client().get(f"/submissions/{not_used.submission_id}/").content.decode()
    listed = page.split('id="flags"')[1].split("</ul>")[0]
    assert "backend_not_used" in listed and "backend_share_small" not in listed
    assert "backend_share_small" in page.split('id="notes"')[1].split("</ul>")[0]


def test_run_tables_give_kernelbench_counting_beside_the_strict_one(gpu):
    llm = Model.objects.create(litellm_name="openai/gpt-test", display_name="GPT Test")
    problems = [make_problem(2, n) for n in (1, 2, 3)]
    run = Run.objects.create(name="kb", model=llm, hardware=gpu, samples_per_problem=1)
    run.problems.set(problems)
    common = {"hardware": gpu, "model": llm, "run": run}
    make_result(problem=problems[0], ms=1.0, **common)  # 2x, counts in both
    make_result(problem=problems[1], ms=0.5, flags=("backend_not_used",), **common)
    make_result(problem=problems[2], ms=1.0, flags=("result_caching",), **common)

    [strict] = run_fast_p(run)
    [kernelbench] = run_fast_p(run, counting="kernelbench")
    assert (strict.correct, kernelbench.correct) == (1, 2)
    assert kernelbench.fast_p[1.0] == pytest.approx(2 / 3)

    page = Client().get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-fast-p-kernelbench"' in page and "KernelBench&#x27;s counting" in page
    board = Client().get(f"/leaderboard/runs/{run.pk}/", {"format": "json"}).json()
    [row] = board["rows"]
    assert row["correct"] == 1 and row["kernelbench"]["correct"] == 2
    assert row["kernelbench"]["counting"].startswith("KernelBench's counting")
