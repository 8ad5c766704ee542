"""The driver's view of a timing window (evaluator/judge/provenance.py): which processes count as
another's, when a window is timed again, and what is kept. The NVML library is outside this
machine (no GPU driver here): a stand-in answers as the driver's calls do; the real one is
checked on the GPU by the last test."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from evaluator.judge.provenance import DeviceWatch, describe, disturbed, own_pids


class StandInDriver:
    """Answers the pynvml calls DeviceWatch makes, from the samples and processes it is given."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, samples: list[tuple[int, int, int]], running: list[int]):
        self.samples = [SimpleNamespace(pid=p, timeStamp=t, smUtil=u) for p, t, u in samples]
        self.running = [SimpleNamespace(pid=p) for p in running]

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return {self.NVML_CLOCK_SM: 1980, self.NVML_CLOCK_MEM: 3201}[kind]

    def nvmlDeviceGetPowerUsage(self, handle):
        return 412345

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 41

    def nvmlDeviceGetProcessUtilization(self, handle, since):
        newer = [s for s in self.samples if s.timeStamp > since]
        if not newer:
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        return newer

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return self.running


ME = os.getpid()


def watched(driver: StandInDriver, ours: set[int], later: list[tuple[int, int, int]]) -> dict:
    """One window: opened, the `later` samples arrive while it is open, closed."""
    watch = DeviceWatch("cuda:0", nvml=driver, handle=object(), pids=lambda: ours)
    watch.open()
    driver.samples += [SimpleNamespace(pid=p, timeStamp=t, smUtil=u) for p, t, u in later]
    return watch.close()


def test_a_window_with_only_this_evaluations_processes_is_not_disturbed():
    driver = StandInDriver([(4242, 100, 90)], running=[ME, 777])
    seen = watched(driver, {ME, 777}, later=[(ME, 200, 30), (777, 210, 95)])
    assert seen["sampled"] and seen["comparable"]
    assert seen["others"] == [] and not disturbed(seen)
    assert seen["start"] == seen["end"] == {
        "sm_clock_mhz": 1980, "memory_clock_mhz": 3201, "power_w": 412.3, "temperature_c": 41}


def test_a_process_of_another_that_used_the_sms_in_the_window_is_named_and_disturbs_it():
    driver = StandInDriver([(4242, 100, 90)], running=[ME, 777, 4242])
    seen = watched(driver, {ME, 777}, later=[(777, 200, 95), (4242, 205, 60), (4242, 300, 80)])
    assert seen["others"] == [{"pid": 4242, "sm_util_pct": 80}]
    assert disturbed(seen)


def test_samples_from_before_the_window_and_idle_processes_do_not_count():
    # 4242 computed before the window opened (stamp 100); 5151 holds a context but did nothing.
    driver = StandInDriver([(4242, 100, 90)], running=[ME, 4242, 5151])
    seen = watched(driver, {ME}, later=[(5151, 150, 0)])
    assert seen["others"] == [] and not disturbed(seen)


def test_where_the_driver_numbers_processes_otherwise_the_others_are_kept_but_decide_nothing():
    # A judge in a container: the driver does not list the judge's pid among the compute
    # processes, so its pids cannot be compared with the judge's (every window would look
    # disturbed by the judge's own worker).
    driver = StandInDriver([], running=[12, 13])
    seen = watched(driver, {ME}, later=[(13, 200, 70)])
    assert seen["others"] == [{"pid": 13, "sm_util_pct": 70}]
    assert seen["comparable"] is False and not disturbed(seen)


def test_on_a_cpu_or_without_the_library_nothing_is_sampled_and_the_reason_is_kept(monkeypatch):
    cpu = DeviceWatch("cpu")
    cpu.open()
    assert cpu.close() == {"sampled": False, "why": "a CPU: the driver samples GPUs only"}
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # import pynvml fails
    gpu = DeviceWatch("cuda:0")
    gpu.open()
    seen = gpu.close()
    assert seen["sampled"] is False and seen["why"] == "nvidia-ml-py is not installed"
    assert not disturbed(seen)


def test_the_owner_is_told_the_clocks_and_how_many_others_ran_but_never_their_pids():
    seen = watched(StandInDriver([(4242, 100, 90)], running=[ME, 4242]), {ME},
                   later=[(4242, 200, 60)])
    text = describe(seen)
    assert text == ("SM clock 1980 MHz; memory clock 3201 MHz; power 412.3 W; temperature 41 °C; "
                    "1 other process used it")
    assert "4242" not in text
    quiet = watched(StandInDriver([], running=[ME]), {ME}, later=[])
    assert describe(quiet).endswith("; no other process used it")
    assert describe({"sampled": False, "why": "a CPU"}) is None and describe(None) is None


def test_own_processes_are_this_one_and_those_below_it():
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert {ME, child.pid} <= own_pids()
        assert os.getppid() not in own_pids()
    finally:
        child.kill()
        child.wait()


@pytest.mark.gpu
def test_on_a_gpu_the_driver_reads_the_device_and_lists_this_judge():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    x = torch.ones(4096, 4096, device="cuda")
    watch = DeviceWatch("cuda:0")
    assert watch.sampling, watch.why_not
    watch.open()
    for _ in range(50):
        x = x @ x / 4096
    torch.cuda.synchronize()
    seen = watch.close()
    assert seen["sampled"] and seen["start"]["sm_clock_mhz"] > 0, seen
    assert seen["comparable"] is True, seen  # the judge holds a context: the driver lists it
    assert all(o["pid"] != os.getpid() for o in seen["others"])
