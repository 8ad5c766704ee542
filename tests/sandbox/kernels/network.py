# ATTACK (leaving the network namespace): connects to a TCP listener of the host (the test's,
# on 127.0.0.1), first plainly, then after setns() into the network namespace of every process
# it can see (/proc/<pid>/ns/net, through libc). Prints what it got (KB-ATTACK line) and
# returns zeros.
import ctypes
import json
import os
import socket

import torch
import torch.nn as nn

# The shared prelude: conftest.render() puts common.py's text here.
from .common import CONFIG, REPORT, Blocked, attempt, in_scope, processes

CLONE_NEWNET = 0x40000000


def connect():
    with socket.create_connection(("127.0.0.1", CONFIG["port"]), timeout=3) as sock:
        sock.sendall(f"KB-ATTACK {CONFIG['tag']}\n".encode())
    return f"connected to 127.0.0.1:{CONFIG['port']}"


def setns_and_connect():
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    seen, tried, errors = {os.readlink("/proc/self/ns/net")}, 0, set()
    try:
        for pid in in_scope(processes()):
            path = f"/proc/{pid}/ns/net"
            try:
                namespace = os.readlink(path)
                if namespace in seen:
                    continue
                seen.add(namespace)
                fd = os.open(path, os.O_RDONLY)
            except OSError as exc:
                errors.add(f"{type(exc).__name__}: {exc.strerror}")
                continue
            tried += 1
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    errors.add(f"setns: {os.strerror(ctypes.get_errno())}")
                    continue
            finally:
                os.close(fd)
            try:
                return f"{connect()} from the network namespace of pid {pid}"
            except OSError as exc:
                errors.add(f"connect: {exc}"[:60])
    finally:
        libc.setns(own, CLONE_NEWNET)
        os.close(own)
    raise Blocked(f"{tried} other namespaces entered ({sorted(errors)})")


def setns_syscall():
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise Blocked(f"setns: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)
    return "setns() is allowed (into its own namespace)"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        attempt("plain_connect", connect)
        attempt("setns_and_connect", setns_and_connect)
        # For the record: whether the call itself is open (harmless into its own namespace).
        attempt("info_setns_syscall", setns_syscall)
        print("KB-ATTACK " + json.dumps(REPORT, sort_keys=True), flush=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
