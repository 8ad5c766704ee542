"""The driver's view of a timing window (evaluator/judge/provenance.py): which processes count as
the judge's, below it, or others; what a refusal of the driver leaves; what is kept (counts, no
pids) and told the owner. The NVML library is outside this machine (no GPU driver here): a
stand-in answers as pynvml does (one averaged sample per process and period, published at the
period's end; NVMLError with a code); the real one is checked on the GPU by the last test."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from evaluator.flags import describe_device_seen as describe
from evaluator.judge.provenance import DeviceWatch, below_judge


class StandInError(Exception):
    def __init__(self, value: int):
        super().__init__(f"NVML error {value}")
        self.value = value


class StandInDriver:
    """Answers the pynvml calls DeviceWatch makes from the samples it is given: (pid, the end of
    its period, SM %)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, samples: list[tuple[int, int, int]], refuse: int | None = None):
        self.samples = [SimpleNamespace(pid=p, timeStamp=t, smUtil=u) for p, t, u in samples]
        self.refuse = refuse

    def publish(self, samples: list[tuple[int, int, int]]) -> None:
        self.samples += [SimpleNamespace(pid=p, timeStamp=t, smUtil=u) for p, t, u in samples]

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return {self.NVML_CLOCK_SM: 1980, self.NVML_CLOCK_MEM: 3201}[kind]

    def nvmlDeviceGetPowerUsage(self, handle):
        return 412345

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 41

    def nvmlDeviceGetProcessUtilization(self, handle, since):
        if self.refuse is not None:
            raise StandInError(self.refuse)
        newer = [s for s in self.samples if s.timeStamp > since]
        if not newer:
            raise StandInError(6)  # NVML_ERROR_NOT_FOUND
        return newer


ME = os.getpid()
WORKER = 777  # below the judge, as process_tree would find it


def watched(driver: StandInDriver, later: list[tuple[int, int, int]],
            below: set[int] = frozenset({WORKER})) -> dict:
    """One window: opened, `later` published while it is open, closed."""
    watch = DeviceWatch("cuda:0", nvml=driver, handle=object(), below=lambda: set(below))
    watch.open()
    driver.publish(later)
    return watch.close()


def test_a_window_with_only_the_judge_and_its_worker_counts_no_other_process():
    driver = StandInDriver([(4242, 100, 90)])  # published before the window: not its own
    seen = watched(driver, later=[(ME, 200, 30), (WORKER, 200, 95)])
    assert seen["sampled"] and seen["comparable"]
    assert (seen["others"], seen["below_judge_busy"], seen["samples"]) == (0, 1, 2)
    assert seen["start"] == seen["end"] == {
        "sm_clock_mhz": 1980, "memory_clock_mhz": 3201, "power_w": 412.3, "temperature_c": 41}
    assert seen["window_ms"] >= 0


def test_another_process_that_used_the_sms_is_counted_and_an_idle_one_is_not():
    driver = StandInDriver([])
    seen = watched(driver, later=[(ME, 200, 30), (4242, 200, 60), (5151, 200, 0)])
    assert (seen["others"], seen["others_max_sm_util_pct"]) == (1, 60)
    assert "4242" not in repr(seen) and "5151" not in repr(seen)  # counts only, never pids


def test_a_process_the_candidate_started_below_the_judge_is_counted_apart_from_others():
    driver = StandInDriver([])
    seen = watched(driver, later=[(ME, 200, 30), (WORKER, 200, 50), (888, 200, 70)],
                   below={WORKER, 888})
    assert (seen["below_judge_busy"], seen["others"]) == (2, 0)


def test_where_the_judge_is_not_among_the_samples_its_pids_are_not_comparable():
    # A judge whose pid namespace the driver does not translate into: the samples carry pids
    # the judge numbers otherwise, its own among them under another number.
    driver = StandInDriver([])
    seen = watched(driver, later=[(13, 200, 70), (14, 200, 40)])
    assert seen["comparable"] is False and seen["others"] == 2
    assert describe(seen).endswith("2 other processes seen, not told apart from the judge's own")


def test_a_refusal_of_the_driver_is_kept_as_not_sampled_never_as_nobody_there():
    driver = StandInDriver([], refuse=3)  # NVML_ERROR_NOT_SUPPORTED (MIG, some virtual GPUs)
    seen = watched(driver, later=[])
    assert seen == {"sampled": False, "why": "NVML: NVML error 3"}
    assert describe(seen) is None


def test_no_sample_at_all_in_the_window_is_an_empty_window():
    driver = StandInDriver([])
    seen = watched(driver, later=[])
    assert seen["sampled"] and seen["samples"] == 0 and seen["comparable"] is False


def test_on_a_cpu_or_without_the_library_nothing_is_sampled_and_the_reason_is_kept(monkeypatch):
    cpu = DeviceWatch("cpu")
    cpu.open()
    assert cpu.close() == {"sampled": False, "why": "a CPU: the driver samples GPUs only"}
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # import pynvml fails
    gpu = DeviceWatch("cuda:0")
    gpu.open()
    assert gpu.close() == {"sampled": False, "why": "nvidia-ml-py is not installed"}


def test_the_owner_is_told_the_clocks_and_how_many_others_ran():
    seen = watched(StandInDriver([]), later=[(ME, 200, 10), (4242, 200, 60)])
    assert describe(seen) == ("SM clock 1980 MHz; memory clock 3201 MHz; power 412.3 W; "
                              "temperature 41 °C; 1 other process used it")
    quiet = watched(StandInDriver([]), later=[(ME, 200, 10)])
    assert describe(quiet).endswith("; no other process used it")
    assert describe(None) is None


def test_the_processes_below_the_judge_are_its_children_and_theirs():
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in below_judge()
        assert ME not in below_judge() and os.getppid() not in below_judge()
    finally:
        child.kill()
        child.wait()


@pytest.mark.gpu
def test_on_a_gpu_the_driver_sees_the_judge_and_counts_a_busy_process_that_is_not_its_own():
    """A real driver: a second process computing through a window of about two seconds is one
    "other" (told as not below the judge), and the judge's own pid is among the samples."""
    import subprocess
    import sys
    import time

    import torch

    busy = subprocess.Popen([sys.executable, "-c", (
        "import torch, time\n"
        "x = torch.randn(8192, 8192, device='cuda')\n"
        "t = time.time()\n"
        "while time.time() - t < 20:\n"
        "    x = (x @ x).clamp_(-1, 1)\n"
        "    torch.cuda.synchronize()\n")])
    try:
        x = torch.randn(4096, 4096, device="cuda")
        time.sleep(5)  # the busy process has its context and computes
        watch = DeviceWatch("cuda:0", below=set)  # nothing counts as below the judge
        assert watch.sampling, watch.why_not
        watch.open()
        t = time.time()
        while time.time() - t < 2:
            x = (x @ x).clamp_(-1, 1)
            torch.cuda.synchronize()
        time.sleep(1.2)  # the window's last period is published
        seen = watch.close()
    finally:
        busy.kill()
        busy.wait()
    assert seen["sampled"] and seen["start"]["sm_clock_mhz"] > 0, seen
    assert seen["comparable"] is True, seen
    assert seen["others"] >= 1, seen
