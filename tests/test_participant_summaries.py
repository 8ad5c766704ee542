"""The people's and the models' tables read a stored summary a participant, hardware and level
(ParticipantSummary), and the leaderboards index one a board (BoardSummary), counted from the
best entries as results land: they follow each new result, each re-verification, each change of
a problem's status, and a rebuild gives the same."""

import pytest
from django.contrib.auth import get_user_model

from evaluation.services import hardware_register
from evaluator import flags
from leaderboard import selectors
from leaderboard.models import BoardSummary, ParticipantSummary
from leaderboard.services import boards_rebuild, summaries_rebuild
from submissions.models import Evaluation, Submission
from submissions.runs.models import Model
from tests.leaderboard_factory import make_problem, make_result

pytestmark = pytest.mark.django_db

State = Submission.ReverificationState
FIELDS = ("participant", "hardware_id", "level", "user_id", "model_id", "attempted", "compiled",
          "correct", "fast_eager", "fast_compile", "geomean_eager", "geomean_compile")


@pytest.fixture
def gpu(db):
    return hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")


@pytest.fixture
def ada(db):
    return get_user_model().objects.create_user(username="ada", password="a-long-passphrase-1")


def summaries() -> list[dict]:
    return list(ParticipantSummary.objects.order_by("participant", "level").values(*FIELDS))


def ada_row(gpu) -> dict:
    [row] = selectors.people_table(hardware=gpu)
    return row


def reverify(first: Evaluation, *, state: str, **result) -> Evaluation:
    """A re-verification's evaluation, stored as the runner stores one."""
    Submission.objects.filter(pk=first.submission_id).update(reverification=state)
    return make_result(problem=first.submission.problem, hardware=first.hardware,
                       submission=first.submission, purpose=Evaluation.Purpose.REVERIFY, **result)


def test_a_summary_follows_each_result_that_lands(gpu, ada):
    p1, p2 = make_problem(1, 1), make_problem(1, 2)
    make_result(problem=p1, hardware=gpu, user=ada, verdict="incorrect")
    [summary] = summaries()
    assert (summary["participant"], summary["level"]) == (f"user:{ada.pk}", 1)
    assert (summary["attempted"], summary["correct"], summary["fast_eager"]["1"]) == (1, 0, 0)

    make_result(problem=p1, hardware=gpu, user=ada, ms=1.0, reference_ms=2.0)  # 2x
    make_result(problem=p2, hardware=gpu, user=ada, ms=4.0, reference_ms=2.0)  # 0.5x
    [summary] = summaries()
    assert (summary["attempted"], summary["correct"]) == (2, 2)
    assert summary["fast_eager"]["1"] == 1 and summary["fast_eager"]["0"] == 2
    assert summary["geomean_eager"] == pytest.approx(1.0)
    row = ada_row(gpu)
    assert (row["solved"], row["fast_1_count"], row["problems"]) == (2, 1, 2)


def test_a_summary_follows_a_reverification_that_flags_or_holds_the_result(gpu, ada):
    problem = make_problem(1, 1)
    first = make_result(problem=problem, hardware=gpu, user=ada, ms=1.0)
    assert ada_row(gpu)["solved"] == 1

    # Caught on its re-verification: off the board, and out of the counts.
    reverify(first, state=State.FAILED, ms=1.0, flags=("result_caching",))
    assert ada_row(gpu)["solved"] == 0 and summaries()[0]["correct"] == 0

    # A later result that is held for its re-verification counts only once it passes.
    held = make_result(problem=problem, hardware=gpu, user=ada, ms=0.5, refresh=False)
    reverify(held, state=State.PENDING, ms=0.5, refresh=True)
    assert ada_row(gpu)["solved"] == 0
    reverify(held, state=State.PASSED, ms=0.55)
    assert ada_row(gpu)["solved"] == 1 and summaries()[0]["fast_eager"]["2"] == 1


def test_a_capped_result_counts_as_no_faster_than_the_reference(gpu, ada):
    problem = make_problem(1, 1)
    make_result(problem=problem, hardware=gpu, user=ada, ms=0.5, reference_ms=2.0,
                flags=(flags.BACKEND_SHARE_SMALL,))
    [summary] = summaries()
    assert summary["correct"] == 1 and summary["fast_eager"]["1"] == 0


def test_a_problems_status_decides_whether_its_entries_count(gpu, ada):
    kept, retired = make_problem(1, 1), make_problem(1, 2)
    make_result(problem=kept, hardware=gpu, user=ada, ms=1.0)
    make_result(problem=retired, hardware=gpu, user=ada, ms=1.0)
    assert (ada_row(gpu)["solved"], ada_row(gpu)["problems"]) == (2, 2)

    retired.retire()  # off the tables: the summary is recounted at once
    assert summaries()[0]["correct"] == 1
    assert (ada_row(gpu)["solved"], ada_row(gpu)["problems"]) == (1, 1)

    retired.publish(override_reason="back")
    assert (ada_row(gpu)["solved"], ada_row(gpu)["problems"]) == (2, 2)

    # A problem published with no entry changes the denominator only.
    make_problem(1, 3)
    assert (ada_row(gpu)["solved"], ada_row(gpu)["problems"]) == (2, 3)

    # A problem moved to another level (the admin's form saves every field) moves its entries.
    retired.level = 2
    retired.save()
    assert [(s["level"], s["correct"]) for s in summaries()] == [(1, 1), (2, 1)]


def test_a_participant_with_no_entry_left_on_a_published_problem_has_no_summary(gpu, ada):
    problem = make_problem(1, 1)
    make_result(problem=problem, hardware=gpu, user=ada, ms=1.0)
    problem.retire()
    assert summaries() == [] and selectors.people_table(hardware=gpu) == []


def test_a_rebuild_gives_the_summaries_the_results_gave_as_they_landed(gpu, ada):
    llm = Model.objects.create(litellm_name="openai/gpt-test", display_name="GPT Test")
    problems = [make_problem(level, n) for level in (1, 2) for n in (1, 2, 3)]
    for i, problem in enumerate(problems):
        make_result(problem=problem, hardware=gpu, user=ada, ms=0.5 + i / 4, speedup_compile=1.2)
        make_result(problem=problem, hardware=gpu, model=llm, ms=2.5 - i / 3,
                    verdict="incorrect" if i % 3 == 0 else "correct")
    incremental = summaries()
    assert len(incremental) == 4  # ada and the model, on each level

    ParticipantSummary.objects.update(correct=0, fast_eager={})  # in doubt
    boards_rebuild()
    assert summaries() == incremental
    assert summaries_rebuild(level=2) == 2 and summaries() == incremental


def boards() -> list[tuple]:
    return list(BoardSummary.objects.order_by("problem_id", "hardware_id").values_list(
        "problem_id", "hardware_id", "participants", "ranked", "evaluated"))


def test_a_boards_counts_follow_its_entries_and_a_rebuild_gives_the_same(gpu, ada):
    bob = get_user_model().objects.create_user(username="bob", password="a-long-passphrase-1")
    problem = make_problem(1, 1)
    first = make_result(problem=problem, hardware=gpu, user=ada, ms=1.0)
    make_result(problem=problem, hardware=gpu, user=bob, verdict="incorrect")
    assert boards() == [(problem.pk, gpu.pk, 2, 1, 2)]
    make_result(problem=problem, hardware=gpu, user=ada, ms=0.9)
    assert boards() == [(problem.pk, gpu.pk, 2, 1, 3)]

    reverify(first, state=State.FAILED, ms=1.0, flags=("result_caching",))
    assert boards() == [(problem.pk, gpu.pk, 2, 1, 3)]  # ada's other kernel ranks in its place
    [row] = selectors.board_index(hardware=gpu)
    assert (row["participants"], row["ranked"]) == (2, 1)
    [busiest] = selectors.busiest_problems()
    assert (busiest["submissions"], busiest["participants"], busiest["ranked"]) == (3, 2, 1)

    counted = boards()
    BoardSummary.objects.update(participants=0, ranked=0)  # in doubt
    boards_rebuild()
    assert boards() == counted
