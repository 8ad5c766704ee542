"""Best entries, ranks, records and the tables, kept up to date as results land."""

import pytest
from django.contrib.auth import get_user_model

from evaluation.services import hardware_register
from kbsite.models import LiveEvent
from leaderboard import selectors
from leaderboard.models import BestEntry, Record
from leaderboard.selectors import board_rows, flagged_rows, record_rows, with_html
from leaderboard.services import boards_rebuild
from problems.models import Problem
from submissions.models import Evaluation
from submissions.runs.models import Model, Run
from tests.leaderboard_factory import make_problem, make_result

pytestmark = pytest.mark.django_db


@pytest.fixture
def gpu(db):
    return hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")


@pytest.fixture
def people(db):
    make = get_user_model().objects.create_user
    return {name: make(username=name, password="a-long-passphrase-1") for name in "abcd"}


@pytest.fixture
def llm(db):
    return Model.objects.create(litellm_name="openai/gpt-test", display_name="GPT Test")


def test_the_board_ranks_each_participants_best_correct_evaluation_by_median(gpu, people, llm):
    problem = make_problem(1, 1)
    make_result(problem=problem, hardware=gpu, user=people["a"], ms=3.0)
    make_result(problem=problem, hardware=gpu, user=people["a"], ms=2.0)
    make_result(problem=problem, hardware=gpu, user=people["b"], ms=1.5)
    make_result(problem=problem, hardware=gpu, model=llm, ms=2.5)
    make_result(problem=problem, hardware=gpu, user=people["c"], ms=0.1, verdict="incorrect")

    rows = board_rows(problem=problem, hardware=gpu)

    assert [(r["rank"], r["participant"], r["candidate_ms"]) for r in rows] == [
        (1, "b", 1.5),
        (2, "a", 2.0),
        (3, "GPT Test", 2.5),
    ]
    assert rows[1]["speedup"] == pytest.approx(1.0)  # reference 2.0 ms / 2.0 ms
    c_entry = BestEntry.objects.get(participant=f"user:{people['c'].pk}")
    assert c_entry.rank is None and c_entry.compiled and c_entry.evaluated == 1


def test_flagged_evaluations_are_shown_apart_and_never_rank(gpu, people):
    problem = make_problem(1, 1)
    make_result(problem=problem, hardware=gpu, user=people["a"], ms=2.0)
    make_result(
        problem=problem, hardware=gpu, user=people["d"], ms=0.01, flags=("timing_underreported",)
    )

    assert [r["participant"] for r in board_rows(problem=problem, hardware=gpu)] == ["a"]
    flagged = flagged_rows(problem=problem, hardware=gpu)
    assert [(r["participant"], r["flags"]) for r in flagged] == [("d", ["timing_underreported"])]


def test_a_reverification_that_flags_a_kernel_takes_it_off_the_board_and_its_record(gpu, people):
    problem = make_problem(1, 1)
    make_result(problem=problem, hardware=gpu, user=people["a"], ms=3.0)
    best = make_result(problem=problem, hardware=gpu, user=people["a"], ms=1.0)
    make_result(problem=problem, hardware=gpu, user=people["b"], ms=2.0)
    assert [r["candidate_ms"] for r in record_rows(problem=problem, hardware=gpu)] == [3.0, 1.0]

    make_result(
        problem=problem,
        hardware=gpu,
        submission=best.submission,
        ms=1.0,
        flags=("result_caching",),
        purpose=Evaluation.Purpose.REVERIFY,
    )

    rows = board_rows(problem=problem, hardware=gpu)
    assert [(r["participant"], r["candidate_ms"]) for r in rows] == [("b", 2.0), ("a", 3.0)]
    assert [r["candidate_ms"] for r in record_rows(problem=problem, hardware=gpu)] == [3.0]
    assert flagged_rows(problem=problem, hardware=gpu)[0]["flags"] == ["result_caching"]


def test_a_record_is_written_only_when_the_boards_best_time_improves(gpu, people, llm):
    problem = make_problem(1, 1)
    for who, ms in [("a", 3.0), ("b", 4.0), ("b", 2.0), ("c", 2.5), ("a", 2.0), ("c", 1.0)]:
        make_result(problem=problem, hardware=gpu, user=people[who], ms=ms)

    records = record_rows(problem=problem, hardware=gpu)
    assert [(r["participant"], r["candidate_ms"], r["previous_ms"]) for r in records] == [
        ("a", 3.0, None),
        ("b", 2.0, 3.0),
        ("c", 1.0, 2.0),
    ]


def test_a_refresh_publishes_the_changed_row_and_the_new_order_after_commit(
    gpu, people, django_capture_on_commit_callbacks
):
    problem = make_problem(1, 1)
    make_result(problem=problem, hardware=gpu, user=people["a"], ms=2.0)
    with django_capture_on_commit_callbacks(execute=True):
        make_result(problem=problem, hardware=gpu, user=people["b"], ms=1.0)

    board_event = LiveEvent.objects.get(group=f"board-{problem.pk}-h200")
    payload = board_event.payload
    b_key, a_key = f"user:{people['b'].pk}", f"user:{people['a'].pk}"
    assert payload["type"] == "board_change"
    assert payload["order"] == [[b_key, 1], [a_key, 2]]
    assert payload["changed"] == [b_key]
    assert [r["key"] for r in payload["rows"]] == [b_key]
    # The runner publishes data; the web process renders the rows as it sends them.
    assert "html" not in payload["rows"][0]
    assert f'<tr data-key="{b_key}">' in with_html(payload)["rows"][0]["html"]
    result = LiveEvent.objects.get(group="leaderboard").payload
    assert result["type"] == "result" and result["record"]["candidate_ms"] == 1.0
    assert result["entry"]["rank"] == 1


def test_rebuilding_from_the_evaluations_gives_the_same_boards_as_the_live_updates(
    gpu, people, llm
):
    cpu = hardware_register(slug="cpu", kind="cpu")
    p1, p2 = make_problem(1, 1), make_problem(1, 2)
    make_result(problem=p1, hardware=gpu, user=people["a"], ms=3.0)
    make_result(problem=p1, hardware=gpu, user=people["b"], ms=2.0)
    make_result(problem=p1, hardware=gpu, user=people["a"], ms=1.0)
    make_result(problem=p1, hardware=cpu, user=people["a"], ms=30.0)
    make_result(problem=p2, hardware=gpu, model=llm, ms=5.0)
    make_result(problem=p2, hardware=gpu, model=llm, verdict="compile_error", ms=None)
    make_result(problem=p2, hardware=gpu, user=people["c"], ms=0.5, flags=("extra_streams",))

    def state():
        entries = BestEntry.objects.order_by("problem", "hardware", "participant").values_list(
            "problem",
            "hardware",
            "participant",
            "rank",
            "evaluation",
            "flagged_evaluation",
            "compiled",
            "evaluated",
        )
        records = Record.objects.order_by("evaluation").values_list(
            "evaluation", "candidate_median_ms", "previous_ms"
        )
        return list(entries), list(records)

    incremental = state()
    assert boards_rebuild() == len(incremental[0]) == 5
    assert state() == incremental


def test_the_models_table_follows_kernelbench_over_every_problem_of_the_level(gpu, llm):
    p1, p2, p3, p4 = (make_problem(1, n) for n in (1, 2, 3, 4))
    make_problem(1, 5, status=Problem.Status.RETIRED)  # leaves the denominator
    make_problem(1, 6, status=Problem.Status.DRAFT)  # not yet part of the level
    make_result(
        problem=p1, hardware=gpu, model=llm, ms=1.0, reference_ms=2.0, speedup_compile=1.5
    )  # 2.0x
    make_result(
        problem=p2, hardware=gpu, model=llm, ms=4.0, reference_ms=2.0, speedup_compile=0.25
    )  # 0.5x
    make_result(problem=p3, hardware=gpu, model=llm, verdict="incorrect", ms=1.0)
    # p4: never attempted.

    [row] = selectors.models_table(hardware=gpu)

    assert (row["model"], row["level"], row["problems"], row["attempted"]) == (
        "GPT Test",
        1,
        4,
        3,
    )
    assert (row["compile_rate"], row["correct_rate"]) == (0.75, 0.5)
    # fast_p over 4 problems: 0 -> 2; 0.5 -> 1 (0.5 is not > 0.5); 0.8, 1, 1.5 -> 1; 2 -> 0.
    assert row["fast_p"] == {"0": 0.5, "0.5": 0.25, "0.8": 0.25, "1": 0.25, "1.5": 0.25, "2": 0.0}
    assert row["geomean_speedup"] == pytest.approx(1.0)  # sqrt(2.0 * 0.5)

    [compiled] = selectors.models_table(hardware=gpu, baseline="compile")
    assert compiled["fast_p"]["1"] == 0.25  # only p1's 1.5x
    assert compiled["geomean_speedup"] == pytest.approx((1.5 * 0.25) ** 0.5)
    with pytest.raises(ValueError, match="baseline"):
        selectors.models_table(baseline="nonsense")


def test_a_retired_problem_leaves_the_tables_and_the_recent_records(gpu, people, llm):
    p1, p2 = make_problem(1, 1), make_problem(1, 2)
    make_result(problem=p1, hardware=gpu, model=llm, ms=1.0)
    make_result(problem=p2, hardware=gpu, model=llm, ms=1.0)
    p2.retire()

    [row] = selectors.models_table(hardware=gpu)
    assert (row["problems"], row["attempted"], row["fast_p"]["0"]) == (1, 1, 1.0)
    assert [r["problem"] for r in selectors.recent_records()] == [p1.slug]
    assert [r["problem"] for r in selectors.busiest_problems()] == [p1.slug]
    # Its own board keeps its history.
    assert len(board_rows(problem=p2, hardware=gpu)) == 1


def _run(llm, gpu, problems, samples: int) -> Run:
    run = Run.objects.create(name="sweep", model=llm, hardware=gpu, samples_per_problem=samples)
    run.problems.set(problems)
    return run


def test_a_run_gives_fast_p_over_sample_zero_and_pass_at_k_over_all_samples(gpu, llm):
    p1, p2, p3 = (make_problem(1, n) for n in (1, 2, 3))
    run = _run(llm, gpu, [p1, p2, p3], samples=3)
    result = {"hardware": gpu, "model": llm, "run": run}
    make_result(problem=p1, sample_index=0, ms=1.0, reference_ms=1.5, **result)  # 1.5x
    make_result(problem=p1, sample_index=1, verdict="incorrect", **result)
    make_result(problem=p1, sample_index=2, ms=1.0, **result)
    make_result(problem=p2, sample_index=0, verdict="incorrect", **result)
    make_result(problem=p2, sample_index=1, ms=1.0, **result)
    # p2's third sample and all of p3 are missing.

    [row] = selectors.run_summary(run)

    assert (row["problems"], row["attempted"], row["correct"]) == (3, 2, 1)
    assert row["fast_p"]["1"] == pytest.approx(1 / 3)
    assert row["fast_p"]["1.5"] == 0.0
    # pass@1: p1 2/3, p2 1/3, p3 0 -> 1/3. pass@2: p1 1, p2 1 - C(2,2)/C(3,2) = 2/3, p3 0
    # -> 5/9. pass@3: p1 1, p2 1, p3 0 -> 2/3.
    assert row["pass_at_k"] == pytest.approx({"pass@1": 1 / 3, "pass@2": 5 / 9, "pass@3": 2 / 3})
    assert row["evaluated_samples"] == 5


def test_a_run_exports_kernelbenchs_eval_results_layout(gpu, llm):
    p1, p2 = make_problem(1, 7), make_problem(1, 9)
    run = _run(llm, gpu, [p1, p2], samples=2)
    good = make_result(problem=p1, hardware=gpu, model=llm, run=run, ms=2.0)
    make_result(
        problem=p1,
        hardware=gpu,
        model=llm,
        run=run,
        sample_index=1,
        verdict="compile_error",
        ms=None,
    )
    make_result(problem=p2, hardware=gpu, model=llm, run=run, verdict="incorrect", ms=1.0)

    staff = get_user_model().objects.create_user(username="staff", is_staff=True)
    data = selectors.run_eval_results(run, viewer=staff)

    assert list(data) == ["7", "9"]
    first, second = data["7"]
    assert (first["sample_id"], first["compiled"], first["correctness"]) == (0, True, True)
    assert first["runtime"] == pytest.approx(2.2)  # KernelBench reports the mean
    assert first["runtime_stats"]["num_trials"] == 20
    assert first["metadata"]["evaluation_id"] == good.pk
    assert first["metadata"]["correctness_trials"] == "(1 / 1)"
    assert (second["sample_id"], second["compiled"], second["correctness"]) == (1, False, False)
    assert (second["runtime"], second["runtime_stats"]) == (-1.0, {})
    assert second["metadata"]["compilation_error"] == "compile_error happened"
    assert data["9"][0]["metadata"]["correctness_issue"] == "incorrect happened"
    # Error text follows the source (selectors.can_see_source): everyone reads it where the
    # problem's code is public; where it is private, others get a generic message.
    public = selectors.run_eval_results(run)
    assert public["7"][1]["metadata"]["compilation_error"] == "compile_error happened"
    Problem.objects.filter(pk=p1.pk).update(code_visibility=Problem.CodeVisibility.OWNER)
    private = selectors.run_eval_results(run)
    assert private["7"][1]["metadata"]["compilation_error"] == "The kernel did not compile."
    assert set(first) == {
        "sample_id",
        "compiled",
        "correctness",
        "metadata",
        "runtime",
        "runtime_stats",
    }


def test_eval_results_of_a_run_over_several_levels_needs_a_level(gpu, llm):
    run = _run(llm, gpu, [make_problem(1, 1), make_problem(2, 1)], samples=1)
    with pytest.raises(ValueError, match="choose one"):
        selectors.run_eval_results(run)
    with pytest.raises(ValueError, match="no problems in level 3"):
        selectors.run_eval_results(run, level=3)
    assert selectors.run_eval_results(run, level=2) == {}


def test_a_users_page_lists_their_standing_on_each_board(gpu, people):
    p1, p2 = make_problem(1, 1), make_problem(1, 2)
    make_result(problem=p1, hardware=gpu, user=people["b"], ms=1.0)
    make_result(problem=p1, hardware=gpu, user=people["a"], ms=2.0)
    make_result(problem=p2, hardware=gpu, user=people["a"], verdict="runtime_error", ms=None)

    entries = selectors.participant_entries(user=people["a"])

    assert [(e["problem"], e["rank"], e["compiled"]) for e in entries] == [
        (p1.slug, 2, True),
        (p2.slug, None, True),
    ]
