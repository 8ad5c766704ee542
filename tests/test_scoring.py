"""One rule decides which result counts (evaluation/scoring.py): the run page, the boards and
the exports agree on a run whose results were flagged, held and re-verified; and the rule itself,
on plain rows, without a database (the tests not marked django_db: they cannot reach one)."""

import csv
import io

import pytest
from django.urls import reverse

from evaluation import scoring
from evaluation.services import hardware_register
from evaluator import flags
from leaderboard import selectors
from leaderboard.selectors import board_rows
from submissions.models import Evaluation, Submission
from submissions.runs.models import Model, Run
from submissions.runs.selectors import run_fast_p, run_progress
from tests.leaderboard_factory import make_problem, make_result, refresh_results

State = Submission.ReverificationState


def reverify(first: Evaluation, *, state: str, **result) -> Evaluation:
    """A second evaluation of the same submission, stored as the runner stores one."""
    Submission.objects.filter(pk=first.submission_id).update(reverification=state)
    return make_result(
        problem=first.submission.problem,
        hardware=first.hardware,
        model=first.submission.model,
        submission=first.submission,
        purpose=Evaluation.Purpose.REVERIFY,
        **result,
    )


@pytest.fixture
def mixed_run(db):
    """Level 1, four problems, one sample each: flagged on re-verification, held, re-verified
    and passed, incorrect. Only the re-verified one counts."""
    gpu = hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")
    llm = Model.objects.create(litellm_name="openai/gpt-test", display_name="GPT Test")
    problems = [make_problem(1, n) for n in (1, 2, 3, 4)]
    run = Run.objects.create(name="mixed", model=llm, hardware=gpu, samples_per_problem=1)
    run.problems.set(problems)
    result = {"hardware": gpu, "model": llm, "run": run}

    replayed = make_result(problem=problems[0], ms=1.0, **result)
    reverify(replayed, state=State.FAILED, ms=1.0, flags=("result_caching",))

    held = make_result(problem=problems[1], ms=0.5, refresh=False, **result)
    Submission.objects.filter(pk=held.submission_id).update(reverification=State.PENDING)
    refresh_results(held)

    confirmed = make_result(problem=problems[2], ms=1.0, **result)
    reverify(confirmed, state=State.PASSED, ms=0.8)

    make_result(problem=problems[3], verdict="incorrect", ms=1.0, **result)
    return run, problems


@pytest.mark.django_db
def test_the_run_page_the_boards_and_the_exports_count_the_same_results(client, mixed_run):
    run, problems = mixed_run
    confirmed_speedup = 2.0 / 0.8  # the re-verification's measurement replaces the first

    # The run page (its live JSON) and the service behind the run API.
    page = client.get(reverse("run_status", args=[run.pk])).json()
    assert page["correct"] == run_progress(run)["correct"] == 1
    [page_row] = page["fast_p"]
    assert (page_row["problems"], page_row["correct"]) == (4, 1)
    assert page_row["fast_1"] == page_row["fast_2"] == 0.25
    assert page_row["geomean_speedup"] == pytest.approx(confirmed_speedup)
    [service_row] = run_fast_p(run)
    assert service_row.correct == 1 and service_row.fast_p[1.0] == 0.25

    # The leaderboard's run table, as its page exports it.
    url = reverse("leaderboard_run", args=[run.pk])
    [board_row] = client.get(url, {"format": "json"}).json()["rows"]
    assert (board_row["problems"], board_row["correct"]) == (4, 1)
    assert board_row["fast_p"]["1"] == board_row["fast_p"]["2"] == 0.25
    assert board_row["geomean_speedup"] == pytest.approx(confirmed_speedup)
    assert board_row["pass_at_k"]["pass@1"] == 0.25
    [csv_row] = list(csv.DictReader(io.StringIO(client.get(url, {"format": "csv"}).text)))
    assert (csv_row["correct"], csv_row["fast_p.1"]) == ("1", "0.25")

    # The problems' boards: only the confirmed kernel ranks; the model's table agrees.
    ranked = {
        problem.number: [
            r["candidate_ms"] for r in board_rows(problem=problem, hardware=run.hardware)
        ]
        for problem in problems
    }
    assert ranked == {1: [], 2: [], 3: [0.8], 4: []}
    [model_row] = selectors.models_table(model_id=run.model_id)
    assert (model_row["correct"], model_row["fast_p"]["1"]) == (1, 0.25)

    # KernelBench's eval_results.json export.
    exported = client.get(reverse("leaderboard_run_eval_results", args=[run.pk])).json()
    assert {
        number: [s["correctness"] for s in samples] for number, samples in exported.items()
    } == {
        "1": [False],
        "2": [False],
        "3": [True],
        "4": [False],
    }
    assert exported["1"][0]["compiled"] and exported["3"][0]["metadata"]["speedup"] == (
        pytest.approx(confirmed_speedup)
    )


@pytest.mark.django_db
def test_a_held_result_counts_once_its_reverification_passes(client, mixed_run):
    run, problems = mixed_run
    held = Evaluation.objects.get(submission__problem=problems[1])
    reverify(held, state=State.PASSED, ms=0.5)

    assert run_progress(run)["correct"] == 2
    assert [r.correct for r in run_fast_p(run)] == [2]
    assert [r["correct"] for r in selectors.run_summary(run)] == [2]
    assert [r["candidate_ms"] for r in board_rows(problem=problems[1], hardware=run.hardware)] == [
        0.5
    ]


def test_the_rule_itself():
    row = {
        "verdict": "correct",
        "correct": True,
        "flags": [],
        "trials": [{"passed": True}],
        "candidate_median_ms": 1.0,
        "speedup": None,
        "speedup_eager": 1.5,
        "speedup_compile": 0.9,
        "submission__reverification": "",
    }
    assert scoring.ranks(row) and scoring.on_board(row) and scoring.compiled(row)
    assert scoring.speedup(row) == 1.5 and scoring.speedup(row, "compile") == 0.9
    assert not scoring.on_board({**row, "submission__reverification": "pending"})
    assert scoring.pending({**row, "submission__reverification": "pending"})
    assert not scoring.ranks({**row, "flags": ["extra_streams"]})
    assert not scoring.ranks({**row, "candidate_median_ms": None})
    assert scoring.counted_speedup({**row, "submission__reverification": "failed"}) is None
    # A rejection after its trials ran still compiled; a compile error did not.
    assert scoring.compiled({**row, "verdict": "rejected", "correct": False})
    assert not scoring.compiled({**row, "verdict": "compile_error", "trials": []})
    # Ties on a board go to whoever got there first, then to the lower id.
    assert sorted(
        [(1.0, 2, 1), (1.0, 1, 9), (0.5, 3, 5)], key=lambda t: scoring.board_order(*t)
    ) == [
        (0.5, 3, 5),
        (1.0, 1, 9),
        (1.0, 2, 1),
    ]
    with pytest.raises(ValueError, match="baseline"):
        scoring.speedup(row, "fastest")


# ---- the rule on plain rows: no database ---------------------------------------------------------


def result(**fields) -> dict:
    """A scoring row (scoring.ROW_FIELDS) of an honest, timed result: 1 ms against 2 ms."""
    return {
        "id": 1,
        "submission_id": 1,
        "hardware_id": 1,
        "verdict": "correct",
        "correct": True,
        "flags": [],
        "trials": [{"passed": True}],
        "candidate_median_ms": 1.0,
        "reference_median_ms": 2.0,
        "speedup": 2.0,
        "speedup_eager": 2.0,
        "speedup_compile": 1.5,
        "finished_at": 1,
        "submission__backend": "cuda",
        "submission__precision": "fp32",
        "submission__user_id": 7,
        "submission__model_id": None,
        "submission__problem_id": 1,
        "submission__reverification": "",
        **fields,
    }


CAPPED = [flags.BACKEND_SHARE_SMALL]


def test_a_model_sample_belongs_to_the_model_whoever_started_its_run():
    assert scoring.participant_key(user_id=7, model_id=None) == "user:7"
    assert scoring.participant_key(user_id=7, model_id=3) == "model:3"
    assert scoring.row_participant(result()) == "user:7"
    assert scoring.row_participant(result(submission__model_id=3)) == "model:3"


def test_a_capped_result_ranks_and_counts_as_no_faster_than_the_reference():
    row = result(candidate_median_ms=0.5, speedup=4.0, speedup_eager=4.0, speedup_compile=3.0,
                 flags=CAPPED)
    assert scoring.on_board(row) and scoring.capped(row)
    assert scoring.notes(row) == CAPPED and scoring.exploits(row) == []
    assert scoring.ranking_ms(row) == 2.0  # the reference's median, not its own 0.5
    assert scoring.speedup(row) == 1.0
    assert scoring.speedup(row, "compile") == pytest.approx(3.0 / 4.0)
    assert scoring.speedup(row, measured=True) == 4.0  # as measured, for KernelBench's counting
    assert scoring.counted_speedup(row, counting="kernelbench") == 4.0
    # A capped result slower than its reference keeps its own, slower, time.
    assert scoring.ranking_ms(result(candidate_median_ms=3.0, speedup=2 / 3, flags=CAPPED)) == 3.0


def test_a_board_orders_results_by_the_time_they_rank_with():
    capped = result(id=1, candidate_median_ms=0.5, flags=CAPPED, finished_at=1)
    honest = result(id=2, candidate_median_ms=1.0, finished_at=2)
    assert sorted([capped, honest], key=scoring.row_order) == [honest, capped]
    # Equal times: the earlier result first, then the lower id.
    first, second = result(id=9, finished_at=1), result(id=3, finished_at=2)
    assert sorted([second, first], key=scoring.row_order) == [first, second]


def test_a_holding_note_keeps_an_honest_result_off_the_board_without_flagging_it():
    row = result(flags=[flags.TIMING_UNCONFIRMED])
    assert scoring.timing_held(row) and not scoring.ranks(row) and not scoring.on_board(row)
    assert scoring.exploits(row) == [] and scoring.honest_and_timed(row)
    assert not scoring.timing_held(result(flags=CAPPED))


def test_a_timing_not_reproduced_is_a_note_on_a_result_that_ranks_never_a_hold():
    # Its evaluations disagreed: it ranks at the slowest of them (evaluation/stats.settle).
    row = result(flags=[flags.TIMING_NOT_REPRODUCED], submission__reverification="passed")
    assert not scoring.timing_held(row) and scoring.on_board(row)
    assert scoring.exploits(row) == [] and scoring.notes(row) == [flags.TIMING_NOT_REPRODUCED]
    # An exploit with the note is flagged, not held.
    assert not scoring.timing_held(result(flags=["result_caching", flags.TIMING_UNCONFIRMED]))


def test_a_reverification_holds_or_releases_a_result():
    assert scoring.held(result(submission__reverification="failed"))
    assert not scoring.on_board(result(submission__reverification="failed"))
    assert scoring.pending(result(submission__reverification="pending"))
    assert scoring.on_board(result(submission__reverification="passed"))
    assert not scoring.pending(result(submission__reverification="pending", correct=False))


def test_kernelbench_counting_ignores_notes_and_the_backend_check_but_not_exploits():
    unused = result(flags=["backend_not_used"])
    assert not scoring.counted(unused) and scoring.counted(unused, "kernelbench")
    held = result(flags=[flags.TIMING_NOT_REPRODUCED], submission__reverification="failed")
    assert not scoring.counted(held) and scoring.counted(held, "kernelbench")
    flagged = result(flags=["result_caching"])
    assert not scoring.counted(flagged, "kernelbench")
    assert scoring.counted_speedup(flagged) is None
    with pytest.raises(ValueError, match="counting"):
        scoring.counted(unused, "loose")


def test_a_participants_best_is_on_the_board_first_then_compiled_then_faster():
    on_board = result(speedup=1.1)
    faster_but_flagged = result(speedup=5.0, flags=["result_caching"])
    did_not_build = result(verdict="compile_error", correct=False, trials=[], speedup=None,
                           candidate_median_ms=None)
    ordered = sorted([on_board, did_not_build, faster_but_flagged], key=scoring.best_of_key)
    assert ordered == [did_not_build, faster_but_flagged, on_board]
