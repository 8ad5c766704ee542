"""Attacks on the host's resources and on what is stored (issue 38), through a real runner as in
test_attacks.py: one real attack per class, each stopped at its limit with a clear verdict, the
next honest evaluation on the same runner correct, and the host's free disk and memory back to
where they were.

The runner here gets small limits, so that each attack stays small and fast: a 256 MiB build
slot (KB_BUILD_SLOT_MB) and 128 MiB files (KB_SANDBOX_FILE_SIZE_MB, RLIMIT_FSIZE). Each test
first evaluates an honest kernel and reads the host's room once it has settled (the runner's
next spare judge up, as it is after the attack). docs/security.md, "Limits", says what enforces
each limit.

- the build slot: files unlinked and kept open, 1 GiB of them (invisible to a walk of the
  folder): RLIMIT_FSIZE stops each at 128 MiB and the slot's own tmpfs (or, where the runner
  cannot mount one, its count of deleted files held open) at 256 MiB, and the runner stops
  the evaluation.
- memory in anonymous files: memfd_create is refused; the channel's own memfds and a file of
  /dev/shm unlinked and kept open stop at RLIMIT_FSIZE.
- a reply that declares more output than the judge accepts: refused before the judge
  allocates anything (protocol.Channel.max_tensor_bytes).
- a final state of 40 MB: refused (a reply header over 8 MiB); one of 2 MB: accepted, and each
  stored field cut to its limit with a marker.
"""

from __future__ import annotations

import json
import os

import pytest

from .conftest import assert_room_back, attack_report, dump, settled_room

pytestmark = [pytest.mark.django_db(transaction=True)]

SLOT_MB = 256
FILE_MB = 128
MB = 1 << 20


@pytest.fixture
def runner_env() -> dict[str, str]:
    # One evaluation at a time on a GPU too: each of a GPU's queue workers keeps a spare judge
    # of its own (evaluator/runner/pool.py), so with several an attack that lands on a worker
    # the honest evaluation did not use leaves one more spare up (on the H200 about 1.5 GiB of
    # host memory with its CUDA contexts, seen as "room not back"), and before and after would
    # not compare the same host.
    return {"KB_BUILD_SLOT_MB": str(SLOT_MB), "KB_SANDBOX_FILE_SIZE_MB": str(FILE_MB),
            "RUNNER_EVALUATIONS_PER_GPU": "1"}


def _warm(arena) -> dict[str, int]:
    """An honest evaluation first, then the host's room once the runner's next spare judge is
    up (as it is after the attack)."""
    arena.assert_honest_next_is_correct()
    return settled_room()


def test_files_unlinked_in_the_build_slot_stop_at_its_limit(arena):
    before = _warm(arena)
    attack = arena.attack("unlinked_file", write_mb=1024, hold_s=4)
    evaluation = arena.assert_rejected(attack)
    assert evaluation.verdict == "runtime_error", (evaluation.verdict, evaluation.error)
    assert f"the build folder grew past {SLOT_MB} MiB" in evaluation.error, evaluation.error
    print(f"KB-VERDICT {evaluation.verdict}: {evaluation.error}")
    limits = (evaluation.environment or {}).get("limits") or {}
    print(f"KB-LIMITS {json.dumps(limits)}")
    assert_room_back(before)
    assert not arena.leftover_processes(), "processes of the attack outlived its evaluation"
    arena.assert_honest_next_is_correct()


def test_memory_in_anonymous_files_stops_at_its_limit(arena):
    before = _warm(arena)
    attack = arena.attack("memfd_hog", memory_mb=384, hold_s=2)
    evaluation = arena.assert_rejected(attack)
    report = attack_report(evaluation)
    arena.assert_blocked(report, ["own_memfd", "channel_memfds", "shm_unlinked"])
    assert "Function not implemented" in report["own_memfd"] or (
        "memory_max_mb" in str(evaluation.environment.get("limits"))), report
    for key in ("channel_memfds", "shm_unlinked"):
        assert f"{FILE_MB} MB, then File too large" in report[key], report
    assert_room_back(before)
    assert not arena.leftover_processes(), "processes of the attack outlived its evaluation"
    arena.assert_honest_next_is_correct()


def test_a_reply_declaring_more_output_than_the_judge_accepts_is_refused(arena):
    before = _warm(arena)
    # Twice the host's memory, declared (nothing written): past the judge's default cap.
    declared = 2 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    attack = arena.attack("oversized_reply", declare_bytes=declared)
    evaluation = arena.assert_rejected(attack)
    assert evaluation.verdict == "runtime_error", (evaluation.verdict, evaluation.error)
    assert f"a tensor of {declared} bytes" in evaluation.error, evaluation.error
    assert "the judge accepts" in evaluation.error, evaluation.error
    print(f"KB-VERDICT {evaluation.verdict}: {evaluation.error}")
    assert_room_back(before)
    arena.assert_honest_next_is_correct()


def test_an_oversized_final_state_is_refused_or_stored_cut(arena):
    before = _warm(arena)
    # 40 MB of state in a reply: past the judge's 8 MiB cap on a reply's header.
    attack = arena.attack("oversized_reply", state_mb=40, correct=True)
    evaluation = arena.assert_rejected(attack)
    assert evaluation.verdict == "runtime_error", (evaluation.verdict, evaluation.error)
    assert "message header of" in evaluation.error, evaluation.error
    print(f"KB-VERDICT {evaluation.verdict}: {evaluation.error}")
    # 2 MB: accepted, and what is stored of it is cut to each field's limit with a marker.
    attack = arena.attack("oversized_reply", state_mb=2, correct=True)
    evaluation = attack.latest_evaluation
    assert attack_report(evaluation)
    stored = dump(evaluation)
    print(f"KB-STORED {evaluation.verdict} {evaluation.flags}: {len(stored)} bytes stored")
    assert len(stored) < 1_500_000, f"one evaluation row of {len(stored)} bytes"
    assert "truncated" in stored
    assert_room_back(before)
    arena.assert_honest_next_is_correct()
