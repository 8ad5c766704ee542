"""Stopping an evaluation this runner process is running, from its lease's heartbeat thread.

sandbox.run_job blocks the thread that called it and takes no stop request, so the heartbeat
ends the evaluation the way a crash of the judge would: it kills the judge processes that
thread started (each the leader of its own process group, killed as a whole). run_job's own
teardown then does the rest, as after any judge that died: its watch reads the closed event
pipe, what is left of the tree (the sandbox, which dies with the judge anyway) is killed, the
build slot goes back, and the device's admission is released as its block ends.

Children are read per thread (/proc/PID/task/TID/children), so another thread's work in this
process is never touched; the pool's spare judge, which the same thread started for the next
evaluation, is left alone (a spare killed by mistake is discarded and replaced anyway).
"""

import contextlib
import logging
import os
import signal

from evaluator.runner import pool

log = logging.getLogger(__name__)


def thread_children(thread_id: int) -> list[int]:
    """The processes the thread `thread_id` (a native id) of this process started, alive."""
    try:
        with open(f"/proc/{os.getpid()}/task/{thread_id}/children") as f:
            return [int(pid) for pid in f.read().split()]
    except (OSError, ValueError):
        return []


def evaluation_stop(*, thread_id: int) -> int:
    """Kill the evaluation that thread `thread_id` of this process runs (its judges' process
    groups); returns how many judges it killed."""
    spare = pool.POOL.spare
    keep = {spare.proc.pid} if spare is not None else set()
    killed = 0
    for pid in thread_children(thread_id):
        if pid in keep:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            # A judge leads its own session (pool.spawn); anything else goes alone.
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
            killed += 1
    if killed:
        log.info("stopped an evaluation: killed %s process group(s)", killed)
    return killed
