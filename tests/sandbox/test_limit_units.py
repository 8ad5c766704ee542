"""The pieces behind the limits of test_limits.py, one by one and without a runner: the judge's
caps on what the worker sends, the stored result's caps, the sandbox's command line and filter,
and the limits the worker applies (docs/security.md, "Limits per evaluation")."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from evaluator import launcher
from evaluator.process import apply_limits, resolve_limits
from evaluator.protocol import JUDGE_MAX_HEADER, Channel, ProtocolError
from evaluator.runner import jail, limits, results


@pytest.fixture
def pair():
    """A worker's end and a judge's end of one channel (host memory only)."""
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()
    mem_w, mem_j = os.memfd_create("w"), os.memfd_create("j")
    worker = Channel(b_r, a_w, mem_w, mem_j, role="worker")
    judge = Channel(a_r, b_w, mem_j, mem_w)
    yield worker, judge
    for fd in (a_r, a_w, b_r, b_w, mem_w, mem_j):
        os.close(fd)


def test_the_judge_refuses_a_tensor_larger_than_it_accepts_before_allocating(pair):
    worker, judge = pair
    judge.max_tensor_bytes = 4096
    worker.send({"ok": True}, torch.ones(512))  # 2048 bytes: accepted
    assert torch.equal(judge.recv(timeout=5)[1], torch.ones(512))
    worker.send({"ok": True}, [torch.ones(512), torch.ones(512), torch.ones(8)])
    with pytest.raises(ProtocolError, match="tensors of 4128 bytes in one reply"):
        judge.recv(timeout=5)
    # Declared, not written: a sparse reply of a terabyte costs the judge nothing.
    worker._frame({"ok": True, "value": {"__tensor__": 0}, "tensors": [
        {"dtype": "torch.float32", "shape": [1 << 38], "device": "cpu", "nbytes": 1 << 40,
         "offset": 0}]})
    with pytest.raises(ProtocolError, match=f"a tensor of {1 << 40} bytes, more than the 4096"):
        judge.recv(timeout=5)


def test_the_judge_refuses_a_header_over_its_cap_and_grows_no_box_past_it(pair):
    worker, judge = pair  # (frames under a pipe's 64 KiB buffer: one thread writes and reads)
    assert judge.max_header_bytes == JUDGE_MAX_HEADER and worker.max_tensor_bytes is None
    worker.send({"ok": True, "probe": {"patched": ["x" * 100] * 400}})
    assert len(judge.recv(timeout=5)[0]["probe"]["patched"]) == 400
    judge.max_header_bytes = 20_000
    worker.send({"ok": True, "probe": {"patched": ["x" * 100] * 400}})
    with pytest.raises(ProtocolError, match="a message header of .* bytes, more than the 20000"):
        judge.recv(timeout=5)


def test_a_stored_field_is_cut_to_its_limit_with_a_marker():
    state = {"patched": ["torch.x" + "y" * 50] * 100_000, "modes": {"a": 1}, "note": "z" * 10**6}
    capped = results.cap_result({"checks": {"final_state": state}, "verdict": "correct"})
    assert capped["verdict"] == "correct"
    text = json.dumps(capped["checks"])
    assert len(text) <= results.RESULT_FIELD_MAX_BYTES and "truncated" in text
    assert capped["checks"]["final_state"]["modes"] == {"a": 1}
    small = {"trials": [{"k": 1, "max_abs_diff": 0.0}]}
    assert results.cap_result(small) == small


def test_the_sandbox_tmpfs_is_mounted_before_the_read_only_binds():
    """A checkout under /tmp: its .venv, bound read-only, would be hidden by a tmpfs on /tmp
    mounted after it."""
    decision = {"bwrap": "bwrap", "seccomp": os.devnull, "uid": None, "slot": "/tmp/slot",
                "harness": "/tmp/clone/evaluator", "device": "cpu", "tmpfs_mb": 64,
                "readonly": ["/usr", "/tmp/clone/.venv"]}
    cmd, fds = launcher.command(decision, ["python"])
    for fd in fds:
        os.close(fd)
    tmpfs = cmd.index("/tmp", cmd.index("--tmpfs"))
    assert cmd[tmpfs - 1] == "--tmpfs" and tmpfs < cmd.index("/tmp/clone/.venv")
    assert "--dir" not in cmd[tmpfs + 1:] or cmd[cmd.index("--dir", tmpfs) + 1] != "/tmp"
    # With a cgroup, bwrap starts inside it.
    cmd, fds = launcher.command({**decision, "cgroup": "/sys/fs/cgroup/kb-x"}, ["python"])
    for fd in fds:
        os.close(fd)
    assert cmd[:2] == ["/bin/sh", "-c"] and cmd[3] == "/sys/fs/cgroup/kb-x/cgroup.procs"


def test_the_worker_applies_the_file_size_and_oom_score_and_memfd_create_is_refused(tmp_path):
    pytest.importorskip("pyseccomp")
    limits = resolve_limits({"file_size_mb": 1, "processes": None, "open_files": None}, False)
    assert limits["RLIMIT_FSIZE"] == 1 << 20 and limits["oom_score_adj"] == 1000
    bpf = tmp_path / "filter.bpf"
    bpf.write_bytes(jail.seccomp_program())
    code = f"""
import ctypes, json, os, sys
sys.path.insert(0, {str(jail.Path(__file__).resolve().parents[2])!r})
from evaluator.process import apply_limits
applied = apply_limits(json.loads(sys.argv[1]))
out = {{"applied": applied, "oom": open("/proc/self/oom_score_adj").read().strip()}}
try:
    with open({str(tmp_path / "big")!r}, "wb") as f:
        f.write(b"x" * (2 << 20))
except OSError as exc:
    out["write"] = exc.strerror
# The filter, as bwrap loads it: PR_SET_NO_NEW_PRIVS, then SECCOMP_SET_MODE_FILTER.
prog = open({str(bpf)!r}, "rb").read()
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.byref(Prog(len(prog) // 8, prog)), 0, 0) == 0
try:
    os.memfd_create("x")
    out["memfd"] = "made"
except OSError as exc:
    out["memfd"] = exc.strerror
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", code, json.dumps(limits)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["applied"]["RLIMIT_FSIZE"] == 1 << 20 and out["oom"] == "1000"
    assert out["write"] == "File too large" and out["memfd"] == "Function not implemented"
    assert apply_limits({}) == {}


def test_a_dead_runners_slot_tmpfs_is_swept_and_a_live_ones_kept(tmp_path):
    """A runner killed outright never unmounts its slots: the next runner's first evaluation
    sweeps those whose runner process is gone, and only those."""
    import tempfile

    made = []
    for owner in ("dead", "alive"):
        workdir = Path(tempfile.mkdtemp(prefix="kbeval-"))
        slot = workdir / "slot"
        slot.mkdir()
        if limits.mount_slot(slot, 4, None, 100):
            shutil.rmtree(workdir)
            pytest.skip("this runner cannot mount a tmpfs on a slot")
        if owner == "dead":
            dead = subprocess.Popen(["true"])
            dead.wait()
            start = "0"
            (workdir / limits.OWNER_FILE).write_text(f"{dead.pid} {start}")
        (slot / "object.o").write_bytes(b"o" * 1000)
        made.append((workdir, slot))
    try:
        limits.sweep_stale_slots()
        (dead_dir, dead_slot), (live_dir, live_slot) = made
        assert not dead_dir.exists()
        assert (live_slot / "object.o").exists() and os.path.ismount(live_slot)
    finally:
        for workdir, slot in made:
            limits.unmount_slot(slot)
            shutil.rmtree(workdir, ignore_errors=True)
