"""How tensors travel between judge and worker: through GPU memory (CUDA IPC boxes the judge
owns) on a GPU, host memory otherwise; each side keeps its own copy, and the judge reads only
inside its own box whatever the worker claims."""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

import pytest
import torch

from evaluator import ipc, protocol
from evaluator.protocol import Channel, ProtocolError
from evaluator.runner.sandbox import run_job

from . import problems as p
from .conftest import make_job


def _meta(offset: int, nbytes: int, shape: list[int]) -> dict:
    return {"dtype": "torch.float32", "shape": shape, "offset": offset, "nbytes": nbytes,
            "ipc": True, "device": "cuda:0"}


def test_the_judge_reads_only_inside_its_own_box():
    judge = Channel(-1, -1, -1, -1)
    box = torch.arange(4096, dtype=torch.int32).view(torch.uint8)  # 16 KiB
    judge.out_box = SimpleNamespace(tensor=box)
    for offset, nbytes in ((0, 16384 + 4), (16128, 512), (4, 4), (1 << 40, 4)):
        with pytest.raises(ProtocolError):
            judge._read_tensor(_meta(offset, nbytes, [nbytes // 4]), "cpu")
    got = judge._read_tensor(_meta(256, 1024, [256]), "cpu")
    assert torch.equal(got, box[256:1280].view(torch.float32))
    # A private copy: the worker writing the box later changes nothing the judge holds.
    box.zero_()
    assert got.abs().sum() > 0
    assert got._kb_device == "cuda:0"  # the device the sender reported, for the comparison


def test_the_worker_gets_its_own_copy_of_what_the_judge_put_in_the_box():
    worker = Channel(-1, -1, -1, -1, role="worker")
    box = torch.randn(256).view(torch.uint8)
    worker.in_box = box
    got = worker._read_tensor(_meta(0, 512, [128]), "cpu")
    assert torch.equal(got, box[:512].view(torch.float32))
    assert got.untyped_storage().data_ptr() != box.untyped_storage().data_ptr()
    with pytest.raises(ProtocolError):
        Channel(-1, -1, -1, -1, role="worker")._read_tensor(_meta(0, 512, [128]), "cpu")


def test_on_the_cpu_tensors_travel_through_host_memory_and_it_is_recorded():
    a_r, a_w = os.pipe()
    mem_a, mem_b = os.memfd_create("a"), os.memfd_create("b")
    judge = Channel(-1, a_w, mem_a, mem_b)
    worker = Channel(a_r, -1, mem_b, mem_a, role="worker")
    value = [torch.randn(1000), torch.arange(10)]
    judge.send({"cmd": "run"}, value)
    _, got = worker.recv(timeout=5)
    assert torch.equal(got[0], value[0]) and torch.equal(got[1], value[1])
    assert judge.ipc is False and judge.stats["ipc_bytes"] == 0
    assert judge.stats["host_bytes"] == 4000 + 80
    for fd in (a_r, a_w, mem_a, mem_b):
        os.close(fd)


def test_memory_torch_did_not_allocate_is_wrapped_in_place_and_its_owner_kept():
    # On a GPU this wraps the judge's cuMemAlloc'd boxes and the worker's IPC mappings.
    memory = torch.arange(64, dtype=torch.uint8)
    owner = object()
    tensor = ipc.wrap_device_memory(memory.data_ptr(), 64, torch.device("cpu"), owner)
    assert tensor.data_ptr() == memory.data_ptr() and tensor.numel() == 64
    tensor[3] = 99
    assert int(memory[3]) == 99  # the same memory, no copy
    assert tensor._kb_owner is owner


class HostBox:
    """Stands in for a CUDA box where there is no GPU: host memory, 'mapped' by handle."""

    mapped: dict[str, torch.Tensor] = {}

    def __init__(self, device: str, nbytes: int):
        self.nbytes = nbytes
        self.tensor = torch.zeros(nbytes, dtype=torch.uint8)
        self.handle = os.urandom(64).hex()
        HostBox.mapped[self.handle] = self.tensor

    def describe(self) -> dict:
        return {"handle": self.handle, "bytes": self.nbytes}


def _host_open(device: str, description: dict) -> torch.Tensor:
    return HostBox.mapped[description["handle"]]


def _pair(monkeypatch, open_box=_host_open) -> tuple[Channel, Channel, list]:
    """A judge and a worker channel, with the GPU path taken for CPU tensors."""
    monkeypatch.setattr(protocol, "IPC_DEVICE_TYPES", ["cuda", "cpu"])
    monkeypatch.setattr(protocol, "Box", HostBox)
    monkeypatch.setattr(protocol, "open_box", open_box)
    to_worker_r, to_worker_w = os.pipe()
    to_judge_r, to_judge_w = os.pipe()
    fds = [to_worker_r, to_worker_w, to_judge_r, to_judge_w,
           os.memfd_create("j"), os.memfd_create("w")]
    judge = Channel(to_judge_r, to_worker_w, fds[4], fds[5])
    worker = Channel(to_worker_r, to_judge_w, fds[5], fds[4], role="worker")
    judge.ipc = worker.ipc = None  # as on a GPU: to be probed
    return judge, worker, fds


def _serve(worker: Channel, seen: list) -> None:
    """A worker: doubles what it gets, remembers where its inputs live."""
    while True:
        header, value = worker.recv()
        if header.get("cmd") == "exit":
            return
        if header.get("cmd") == "run":
            seen.append([t.untyped_storage().data_ptr() for t in value])
            worker.send({"ok": True}, [t * 2 for t in value])
        else:
            worker.send({"ok": True})


def test_the_gpu_path_probes_grows_its_boxes_and_delivers_private_copies(monkeypatch):
    judge, worker, fds = _pair(monkeypatch)
    seen: list = []
    thread = threading.Thread(target=_serve, args=(worker, seen), daemon=True)
    thread.start()
    try:
        judge.send({"cmd": "load"})
        judge.recv(timeout=10)
        assert judge.ipc is True and worker.ipc is True, judge.ipc_error
        for size in (3 << 20, 1 << 10, 40 << 20):  # grows past 4x the first message
            inputs = [torch.randn(size // 4), torch.arange(7)]
            judge.send({"cmd": "run"}, inputs)
            _, outputs = judge.recv(timeout=30)
            assert torch.equal(outputs[0], inputs[0] * 2)
            assert torch.equal(outputs[1], inputs[1] * 2)
            boxes = [b.untyped_storage().data_ptr() for b in HostBox.mapped.values()]
            assert not set(seen[-1]) & set(boxes), "the worker works on copies, not the box"
            assert outputs[0].untyped_storage().data_ptr() not in boxes
        assert judge.in_box.nbytes >= 40 << 20 and judge.out_box.nbytes >= 40 << 20
        assert judge.stats["host_bytes"] == 0 and judge.stats["ipc_bytes"] >= 2 * (43 << 20)
        judge.send({"cmd": "exit"})
        thread.join(timeout=10)
    finally:
        for fd in fds:
            os.close(fd)


def test_when_the_worker_cannot_map_the_boxes_everything_goes_through_host_memory(monkeypatch):
    def cannot_map(device: str, description: dict) -> torch.Tensor:
        raise ipc.CudaIpcError("cuIpcOpenMemHandle failed: CUDA_ERROR_INVALID_VALUE")

    judge, worker, fds = _pair(monkeypatch, open_box=cannot_map)
    seen: list = []
    thread = threading.Thread(target=_serve, args=(worker, seen), daemon=True)
    thread.start()
    try:
        judge.send({"cmd": "load"})
        judge.recv(timeout=10)
        assert judge.ipc is False and "CUDA_ERROR_INVALID_VALUE" in judge.ipc_error
        inputs = [torch.randn(1 << 18)]
        judge.send({"cmd": "run"}, inputs)
        _, outputs = judge.recv(timeout=30)
        assert torch.equal(outputs[0], inputs[0] * 2)
        assert judge.stats["ipc_bytes"] == 0 and judge.stats["host_bytes"] == 2 * (1 << 20)
        judge.send({"cmd": "exit"})
        thread.join(timeout=10)
    finally:
        for fd in fds:
            os.close(fd)


def test_if_the_gpu_path_breaks_mid_evaluation_the_message_goes_through_host_memory(
        monkeypatch):
    judge, worker, fds = _pair(monkeypatch)
    seen: list = []
    thread = threading.Thread(target=_serve, args=(worker, seen), daemon=True)
    thread.start()
    try:
        judge.send({"cmd": "load"})
        judge.recv(timeout=10)
        assert judge.ipc is True

        def broken(t: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

        monkeypatch.setattr(protocol, "_device_bytes", broken)
        inputs = [torch.randn(1 << 16)]
        judge.send({"cmd": "run"}, inputs)
        _, outputs = judge.recv(timeout=30)
        assert torch.equal(outputs[0], inputs[0] * 2)  # the worker's side broke too: host
        assert judge.ipc is False and "illegal memory access" in judge.ipc_error
        assert judge.stats["host_bytes"] == 2 * (1 << 18) and judge.stats["ipc_bytes"] == 0
        judge.send({"cmd": "exit"})
        thread.join(timeout=10)
    finally:
        for fd in fds:
            os.close(fd)


# --- on a GPU (skipped here; scripts/gpu_check.sh tests runs them on the H200) -----------------

BIG_RELU = p.RELU.replace("torch.randn(64, 33)", "torch.randn(4096, 8192)")  # 128 MiB inputs
BIG_RIGHT = BIG_RELU.replace("class Model(", "class ModelNew(")
MUTATES = BIG_RIGHT.replace("return torch.relu(x)", "return torch.relu_(x)")


@pytest.mark.gpu
def test_cuda_tensors_travel_through_gpu_memory_and_the_verdicts_hold():
    result = run_job(make_job(BIG_RELU, BIG_RIGHT, device="cuda", measure=True))
    assert result["verdict"] == "correct", result["error"]
    transfer = result["environment"]["transfer"]
    assert transfer["cuda_ipc"] is True, transfer
    # Five trials and the timing sets in, five outputs back: all through the boxes.
    assert transfer["ipc_bytes"] >= 10 * 4096 * 8192 * 4
    # The worker works on copies: a kernel writing its input in place is caught as before.
    mutated = run_job(make_job(BIG_RELU, MUTATES, device="cuda"))
    assert mutated["verdict"] in ("rejected", "incorrect"), mutated["error"]
    assert mutated["environment"]["transfer"]["cuda_ipc"] is True


@pytest.mark.gpu
def test_without_cuda_ipc_the_same_evaluation_goes_through_host_memory(monkeypatch):
    monkeypatch.setenv("KB_HARNESS_CUDA_IPC", "0")
    result = run_job(make_job(BIG_RELU, BIG_RIGHT, device="cuda"))
    assert result["verdict"] == "correct", result["error"]
    transfer = result["environment"]["transfer"]
    assert transfer["cuda_ipc"] is False and transfer["ipc_bytes"] == 0


def test_ready_says_no_at_once_when_only_the_channels_own_frame_has_come(monkeypatch):
    """The judge asks whether its profiling worker has replied without waiting for it
    (workers.Profiler.warm_now): the IPC probe's answer, which comes first, is not a reply."""
    judge, worker, fds = _pair(monkeypatch)
    judge.send({"cmd": "profiler_warm"})  # the first message carries the probe
    header, _ = worker.recv()  # the worker answers the probe on the way...
    assert header["cmd"] == "profiler_warm"
    time.sleep(0.1)
    started = time.monotonic()
    assert judge.ready(timeout=5) is False, "the probe's answer is not a message"
    assert time.monotonic() - started < 0.5
    worker.send({"ok": True, "warm_s": 3.0})  # ...and replies later
    time.sleep(0.1)
    assert judge.ready(timeout=5) is True and judge.holding
    reply, _ = judge.recv(timeout=5)
    assert reply == {"ok": True, "warm_s": 3.0} and not judge.holding
    for fd in fds:
        os.close(fd)
