"""One device, several evaluations (evaluator/gate.py): untimed steps share it, a timing
has it alone, and memory admits an evaluation only when it fits.

The lock tests use threads, each with its own DeviceGate: flock treats each open of the file as
its own lock holder, as it treats the judges' processes. The last test runs real evaluations at
once through run_job and reads when each was timed.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evaluator import gate
from evaluator.gate import DeviceGate
from evaluator.judge.judge import load_holds_device
from evaluator.runner.sandbox import run_job

from .problems import RELU


def _log_step(folder: Path, kind: str, name: str, log: list, hold_s: float,
              started: threading.Event | None = None) -> None:
    g = DeviceGate(folder)
    step = g.exclusive() if kind == "exclusive" else g.shared()
    with step:
        if started is not None:
            started.set()
        log.append(("in", name, time.monotonic()))
        time.sleep(hold_s)
        log.append(("out", name, time.monotonic()))
    g.close()


def _span(log: list, name: str) -> tuple[float, float]:
    start = next(t for kind, n, t in log if kind == "in" and n == name)
    end = next(t for kind, n, t in log if kind == "out" and n == name)
    return start, end


def test_a_timing_waits_for_the_untimed_step_in_progress_and_no_step_starts_while_it_runs(
        tmp_path: Path):
    log: list = []
    first_in = threading.Event()
    untimed = threading.Thread(target=_log_step,
                               args=(tmp_path, "shared", "trial", log, 0.3, first_in))
    untimed.start()
    first_in.wait(5)
    timing = threading.Thread(target=_log_step, args=(tmp_path, "exclusive", "timing", log, 0.3))
    timing.start()
    time.sleep(0.1)  # the timing is waiting for the trial now, holding the turnstile
    later = threading.Thread(target=_log_step, args=(tmp_path, "shared", "later", log, 0.05))
    later.start()
    for t in (untimed, timing, later):
        t.join(10)
    trial, timed, after = _span(log, "trial"), _span(log, "timing"), _span(log, "later")
    assert timed[0] >= trial[1], "the timing began only once the step in progress had ended"
    assert after[0] >= timed[1], "a step asked for while the timing waited came after it"


def test_a_holder_that_never_lets_go_ends_the_wait_at_the_evaluations_deadline(tmp_path: Path):
    """A stopped or hung process holding a step (a spare stopped by its runner once did) must
    not hold a timing back for ever: the waiting judge gives up at its own deadline."""
    holder = DeviceGate(tmp_path)
    waiter = DeviceGate(tmp_path, deadline=time.monotonic() + 0.3)
    with holder.shared():
        t0 = time.monotonic()
        try:
            with waiter.exclusive():
                raise AssertionError("the gate was taken while held")
        except TimeoutError:
            pass
        assert 0.25 <= time.monotonic() - t0 < 2.0
    with DeviceGate(tmp_path, deadline=time.monotonic() + 1).exclusive():
        pass  # let go: free again


def test_untimed_steps_of_several_evaluations_run_at_once(tmp_path: Path):
    log: list = []
    threads = [threading.Thread(target=_log_step, args=(tmp_path, "shared", f"s{i}", log, 0.3))
               for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    spans = [_span(log, f"s{i}") for i in range(3)]
    assert max(s for s, _ in spans) < min(e for _, e in spans), "all three overlapped"


def test_without_a_folder_the_gate_does_nothing(tmp_path: Path):
    g = DeviceGate(None)
    with g.exclusive(), g.shared():
        pass
    assert not g.active and g.waited_s == 0.0


def test_memory_admits_what_fits_and_holds_the_rest_until_room_is_made(tmp_path: Path):
    admitted_at: dict[str, float] = {}
    left_at: dict[str, float] = {}

    def evaluation(name: str, need: int, hold_s: float) -> None:
        with gate.admitted(tmp_path, need, 100, poll_s=0.02):
            admitted_at[name] = time.monotonic()
            time.sleep(hold_s)
            left_at[name] = time.monotonic()

    with ThreadPoolExecutor(3) as pool:
        first = pool.submit(evaluation, "a", 60, 0.4)
        time.sleep(0.1)
        second = pool.submit(evaluation, "b", 30, 0.1)  # 60 + 30 fit
        third = pool.submit(evaluation, "c", 50, 0.1)  # 60 + 30 + 50 do not
        for f in (first, second, third):
            f.result(10)
    assert admitted_at["b"] < left_at["a"], "what fits starts at once"
    assert admitted_at["c"] >= left_at["a"] - 0.01, "what does not waits for room"
    assert gate._read_ledger(tmp_path) == {}, "every evaluation left the ledger"


def test_one_evaluation_alone_is_always_admitted_and_dead_ones_leave_the_ledger(tmp_path: Path):
    gate._write_ledger(tmp_path, {f"{2**22 + 12345}:1": 10**12})  # a pid that cannot exist
    with gate.admitted(tmp_path, 500, 100) as waited:
        assert waited < 1.0
        assert list(gate._read_ledger(tmp_path).values()) == [500]


def test_evaluations_sharing_a_device_are_timed_one_at_a_time(tmp_path: Path):
    """Three real evaluations at once on one gate: all correct, their timed windows disjoint."""
    job = {
        "reference_source": RELU,
        "candidate_source": RELU.replace("class Model(", "class ModelNew("),
        "device": "cpu",
        "n_trials": 2,
        # Each side timed for a second and a half: long enough that, ungated, the three
        # evaluations' timings overlap.
        "timing": {"warmup": 2, "min_reps": 100000, "max_reps": 100000, "max_seconds": 1.5,
                   "warmup_ms": 0},
        "time_limit_s": 120,
        "gate_dir": str(tmp_path / "gate"),
        "memory_need_bytes": 1,
        "device_memory_bytes": 10,
    }
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda seed: run_job({**job, "seed": seed}), (1, 2, 3)))
    assert [r["verdict"] for r in results] == ["correct"] * 3, [r["error"] for r in results]
    windows = sorted(tuple(r["timing_window"]) for r in results)
    for (_, end), (start, _) in zip(windows, windows[1:], strict=False):
        assert start >= end, f"timed at once: {windows}"
    assert all("gate_wait" in r["phases"] for r in results)
    assert not os.listdir(tmp_path / "gate") or gate._read_ledger(tmp_path / "gate") == {}


# A candidate whose loading (its module's own code and its model's construction, where a kernel
# may already launch device work) leaves a trace of when it ran.
LOAD_TRACED = RELU.replace("class Model(", "class ModelNew(").replace(
    "import torch.nn as nn",
    "import torch.nn as nn\nimport time\nprint('load-start', time.time(), flush=True)")


def test_a_candidates_loading_waits_while_another_evaluation_is_timed(tmp_path: Path):
    """Loading runs the candidate's own code, which on a GPU may launch kernels: it is a step
    on the device like a trial, so it must not run while another evaluation holds the device
    alone for its timing (here the test holds it, for longer than a start-up takes)."""
    job = {"reference_source": RELU, "candidate_source": LOAD_TRACED, "device": "cpu",
           "n_trials": 1, "seed": 1, "time_limit_s": 120, "gate_dir": str(tmp_path / "gate"),
           "memory_need_bytes": 1, "device_memory_bytes": 10,
           "timing": {"warmup": 1, "min_reps": 3, "max_reps": 3, "warmup_ms": 0}}
    holder = DeviceGate(tmp_path / "gate")
    with ThreadPoolExecutor(1) as pool, holder.exclusive():
        running = pool.submit(run_job, job)
        time.sleep(8)  # its processes start, and would load the candidate, meanwhile
        released = time.time()
    holder.close()
    result = running.result(timeout=120)
    assert result["verdict"] == "correct", result["error"]
    # What the module prints while it is imported goes to the compile log.
    loaded = float(result["compile_log"].split("load-start", 1)[1].split()[0])
    assert loaded >= released, f"loaded {released - loaded:.1f} s before the timing ended"


def test_only_a_cold_extension_build_or_a_compile_only_job_loads_without_the_device_held():
    triton = {"backend": "triton", "candidate_source": "import triton"}
    cuda = {"backend": "cuda", "candidate_source": "from torch.utils.cpp_extension import load"}
    # Submitted as PyTorch, but it builds a CUDA extension all the same.
    mislabelled = {"backend": "torch", "candidate_source": "m = load_inline(name='k')"}
    assert load_holds_device(triton)
    assert load_holds_device({**cuda, "build_cached": True})
    assert not load_holds_device(cuda)
    assert not load_holds_device(mislabelled)
    assert load_holds_device({**mislabelled, "build_cached": True})
    assert not load_holds_device({**triton, "mode": "compile"})


def _baseline_job(tmp_path: Path, *, measure: bool) -> dict:
    return {"mode": "baseline", "reference_source": RELU, "precision": "fp32", "device": "cpu",
            "seed": 1, "baseline_modes": ["eager"], "measure": measure, "time_limit_s": 8,
            "gate_dir": str(tmp_path / "gate"), "memory_need_bytes": 1,
            "device_memory_bytes": 10}


def test_a_baseline_that_only_compiles_ahead_shares_the_device_and_one_that_times_waits(
        tmp_path: Path):
    """Compiling ahead times nothing, so several run side by side (curation's compile-ahead
    pass); a baseline that times waits until the device is free of untimed work."""
    holder = DeviceGate(tmp_path / "gate")
    with holder.shared():
        ahead = run_job(_baseline_job(tmp_path, measure=False))
        timed = run_job(_baseline_job(tmp_path, measure=True))
    holder.close()
    assert ahead["verdict"] == "measured", ahead["error"]
    assert timed["verdict"] != "measured", "a timed baseline ran while the device was in use"
    after = run_job(_baseline_job(tmp_path, measure=True))
    assert after["verdict"] == "measured" and after["eager"], after["error"]


def test_an_evaluation_waiting_to_run_alone_keeps_newcomers_out_until_it_has_run(
        tmp_path: Path):
    """Its reservation: evaluations that would fit beside the running one wait behind it."""
    order: list[str] = []
    first_in, first_go = threading.Event(), threading.Event()

    def run(name: str, need: int, go: threading.Event | None = None, **how) -> None:
        with gate.admitted(tmp_path, need, 1000, poll_s=0.02, **how):
            order.append(name)
            if name == "first":
                first_in.set()
            if go is not None:
                go.wait(5)
            else:
                time.sleep(0.1)

    first = threading.Thread(target=run, args=("first", 100, first_go))
    first.start()
    first_in.wait(5)
    alone = threading.Thread(target=run, args=("alone", 1000), kwargs={"alone": True})
    alone.start()
    time.sleep(0.2)  # the reservation is in
    newcomer = threading.Thread(target=run, args=("newcomer", 100))
    newcomer.start()
    time.sleep(0.3)
    assert order == ["first"], "the newcomer, which would fit, waited behind the reservation"
    first_go.set()
    for t in (first, alone, newcomer):
        t.join(10)
    assert order == ["first", "alone", "newcomer"]
    assert gate._read_ledger(tmp_path) == {}


def test_a_wait_to_run_alone_given_up_leaves_no_reservation(tmp_path: Path):
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with gate.admitted(tmp_path, 100, 1000):
            inside.set()
            leave.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    inside.wait(5)
    try:
        with gate.admitted(tmp_path, 1000, 1000, alone=True, give_up=True, max_wait_s=0.3,
                           poll_s=0.02):
            raise AssertionError("admitted beside a running evaluation")
    except TimeoutError:
        pass
    assert list(gate._read_ledger(tmp_path).values()) == [100], "only the holder is left"
    with gate.admitted(tmp_path, 100, 1000, max_wait_s=1):
        pass  # a newcomer is not kept out by a reservation given up
    leave.set()
    holder.join(5)


def test_past_its_wait_an_evaluation_that_does_not_fit_still_waits_and_newcomers_queue_behind(
        tmp_path: Path):
    """It never starts beside memory it does not fit (a neighbour would decide its verdict);
    its reservation keeps evaluations that would fit beside the holder from passing it."""
    order = _reserved_then_newcomer(tmp_path, "big", 80, max_wait_s=0.1)  # past its wait
    assert order == ["holder left", "big", "small"]
    assert gate._read_ledger(tmp_path) == {}


def test_an_evaluation_that_needs_the_whole_device_reserves_it_at_once_and_newcomers_wait(
        tmp_path: Path):
    """One whose expected need is all the device admits can start only with nothing else
    running, a moment a stream of smaller evaluations would not leave it before half its time
    limit (177 s for a 12 s evaluation on an H100): it reserves as it arrives, so it waits only
    for those already running."""
    # Reserved at once, long before its 60 s.
    order = _reserved_then_newcomer(tmp_path, "whole device", 120, max_wait_s=60)
    assert order == ["holder left", "whole device", "small"]
    assert gate._read_ledger(tmp_path) == {}


def _reserved_then_newcomer(folder: Path, name: str, need: int, *,
                            max_wait_s: float) -> list[str]:
    """A holder of 60 of 100; `name` waits for `need` until it holds a reservation; then a
    newcomer of 30, which would fit beside the holder, must not start before the holder has
    left. Returns the order in which they started."""
    order: list[str] = []
    holder, leave = _holder(folder, order)
    reserved = _waiter(folder, order, name, need, max_wait_s=max_wait_s)
    _wait_for_reservations(folder, 1)
    small = _waiter(folder, order, "small", 30, max_wait_s=60)  # 60 + 30 would fit
    time.sleep(0.3)
    assert order == [], "nothing started beside the holder, nor passed the reservation"
    leave.set()
    for t in (holder, reserved, small):
        t.join(10)
    return order


def _holder(folder: Path, order: list[str] | None) -> tuple[threading.Thread, threading.Event]:
    """A thread admitted for 60 of the device's 100 until the event it returns is set (then
    "holder left" goes into `order`, where one is given)."""
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with gate.admitted(folder, 60, 100, poll_s=0.02):
            inside.set()
            leave.wait(5)
            if order is not None:
                order.append("holder left")

    thread = threading.Thread(target=hold)
    thread.start()
    inside.wait(5)
    return thread, leave


def _waiter(folder: Path, order: list[str], name: str, need: int, **how) -> threading.Thread:
    """A thread waiting to be admitted for `need` of 100; its name goes into `order` once it
    is, and it holds the device a moment."""
    def run() -> None:
        with gate.admitted(folder, need, 100, poll_s=0.02, **how):
            order.append(name)
            time.sleep(0.05)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _wait_for_reservations(folder: Path, count: int) -> None:
    deadline = time.monotonic() + 10
    while sum(k.endswith(gate.RESERVED) for k in gate._read_ledger(folder)) < count:
        assert time.monotonic() < deadline, "the reservations never came"
        time.sleep(0.02)


def test_a_run_alone_goes_before_a_late_evaluation_that_reserved_first_and_late_ones_in_turn(
        tmp_path: Path):
    """An evaluation that already ran once (out of memory beside others) waits least; the
    late ones are served in the order they came."""
    order: list[str] = []
    holder, leave = _holder(tmp_path, None)
    waiters = []
    for count, (name, how) in enumerate([("late 1", {"max_wait_s": 0.0}),
                                         ("late 2", {"max_wait_s": 0.0}),
                                         ("alone", {"alone": True})], start=1):
        waiters.append(_waiter(tmp_path, order, name, 80, **how))
        _wait_for_reservations(tmp_path, count)
    leave.set()
    for t in (holder, *waiters):
        t.join(10)
    assert order == ["alone", "late 1", "late 2"]
    assert gate._read_ledger(tmp_path) == {}


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_another_evaluations_candidate_processes_stand_still_while_one_is_timed(tmp_path: Path):
    """Needs real processes: a neighbour's sandbox root and its child, spinning, are stopped
    (state T) for the length of the window and go on after it; the judge's own are never
    stopped, and a neighbour's step lets its own go on if a window left them stopped."""
    import subprocess
    import sys

    spin = "import subprocess, sys, time\n" \
           "subprocess.Popen([sys.executable, '-c', 'while True: pass'])\nwhile True: pass\n"
    neighbour = subprocess.Popen([sys.executable, "-c", spin])
    own = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        from evaluator.process import process_tree

        deadline = time.monotonic() + 10
        while not process_tree(neighbour.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = process_tree(neighbour.pid)[0]
        theirs, ours = DeviceGate(tmp_path), DeviceGate(tmp_path)
        theirs.candidates([neighbour.pid])
        ours.candidates([own.pid])
        with ours.exclusive():
            time.sleep(0.2)
            assert _state(neighbour.pid) == "T" and _state(child) == "T"
            assert _state(own.pid) in ("R", "S")
        assert ours.frozen[-1]["processes"] == 2
        time.sleep(0.2)
        assert _state(neighbour.pid) in ("R", "S") and _state(child) in ("R", "S")
        # Left stopped (its judge died in the window): the neighbour's next step resumes them.
        os.kill(neighbour.pid, 19)  # SIGSTOP
        with theirs.shared():
            assert _state(neighbour.pid) in ("R", "S")
        theirs.close()
        with ours.exclusive():  # a closed evaluation is no one's to stop
            assert _state(neighbour.pid) in ("R", "S")
        ours.close()
    finally:
        for proc in (neighbour, own):
            for pid in [proc.pid, *process_tree(proc.pid)]:
                with contextlib.suppress(OSError):
                    os.kill(pid, 9)
            proc.wait()
