"""A judge started ahead of its job (evaluator/runner/pool.py launches this module): the judge's
process entry when the runner's pool starts it. A spare starts the candidate's worker (and its
profiling worker), imports what both need and creates their CUDA contexts, says it is ready, and
only then waits for its job; started for a waiting job, it hands over to the judge at once.

This is the judge's side of the pool, so it lives with the judge: the runner only launches
`-m evaluator.judge.spare` and never imports it, and this module imports nothing of the runner.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import json
import os
import select
import sys
import time
from pathlib import Path
from typing import Any


def _prepare_worker(judge: Any, spec: dict[str, Any]) -> tuple[Any, Any]:
    """Start the judge's worker now (and its profiling worker, workers.Profiler, whose device
    profiler starts at once), and hand them to the judge when it asks for them.

    The judge starts its workers through the `start_worker` it is given, called as
    `WorkerHandle(device, limits, log_limit, workdir)` is; the one built here, with the same
    arguments, is given instead (its `started` reset, so the judge's worker_start phase counts
    only what is left to wait). Any other arguments get a new one, as without the pool.
    Returns that `start_worker` and the timed worker's handle, or (None, None).
    """
    from evaluator.judge.workers import WorkerHandle as original
    base = (spec["device"], spec["limits"], int(spec["log_limit"]))
    names = ["worker"] + (["profiler"] if spec.get("profile_process") else [])
    prepared: dict[Path, Any] = {}
    for name in names:
        try:
            handle = original(*base, Path.cwd() / name)
        except Exception:
            break  # the judge starts its own, as it always did
        if name == "profiler":
            with contextlib.suppress(Exception):
                handle.post({"cmd": "profiler_warm"}, phase="profiling")
                handle.profiler_warm_posted = True
        prepared[Path.cwd() / name] = handle
    if not prepared:
        return None, None
    return PreparedWorkers(original, base, prepared), prepared.get(Path.cwd() / "worker")


class PreparedWorkers:
    """The judge's `start_worker`: the handle prepared for a workdir, where the arguments are the
    spare's, else a new one, as without the pool."""

    def __init__(self, original: Any, base: tuple, prepared: dict[Path, Any]) -> None:
        self.original, self.base, self.prepared = original, base, prepared

    def __call__(self, device: str, limits: dict, log_limit: int, workdir: Path) -> Any:
        handle = self.prepared.pop(Path(workdir), None)
        if handle is not None:
            if (device, limits, log_limit) == self.base and handle.proc.poll() is None:
                handle.started = time.perf_counter()
                return handle
            handle.kill()
        return self.original(device, limits, log_limit, workdir)

    def discard_unused(self) -> None:
        """Kill what the judge did not take (a profiling process its job has none of): it holds
        device memory that the job was not admitted with."""
        while self.prepared:
            _, handle = self.prepared.popitem()
            with contextlib.suppress(Exception):
                handle.kill()


def _preimport(device: str, *, spare: bool) -> None:
    """What the judge imports once its job is there, imported now; a spare on a GPU creates its
    CUDA context now too (the first one on an idle GPU can take seconds)."""
    import torch

    from evaluator.judge import compare  # noqa: F401

    for name in ("judge.exploits", "worker.probe", "samples", "ipc", "judge.speed_of_light",
                 "static_report", "judge.validate"):
        with contextlib.suppress(Exception):
            importlib.import_module(f"evaluator.{name}")
    if spare and device != "cpu":
        # Not through the device's gate (gate.py): the runner stops a spare (SIGSTOP) while its
        # own evaluation is timed, and a spare stopped holding the gate held that timing back
        # until its time limit (on the H200). What it does here is small: a context, a tiny op.
        _warm_device(torch, device)


def _warm_device(torch: Any, device: str) -> None:
    """The context, and what the judge's first steps pay once per process."""
    with contextlib.suppress(Exception):
        torch.empty(1, device=device).zero_()
        torch.cuda.synchronize(device)
    # What the judge's first steps pay once per process, paid here on a tiny problem: on a
    # GPU job (it carries peak rates) the problem's FLOPs are counted, whose first count
    # takes seconds of imports and dispatch set-up, and the read-bytes bound runs a
    # backward pass. Nothing of the candidate is involved.
    with contextlib.suppress(Exception):
        from torch.utils.flop_counter import FlopCounterMode

        x = torch.ones(8, 8, device=device, requires_grad=True)
        with FlopCounterMode(display=False):
            y = torch.nn.functional.gelu(x @ x)
        y.sum().backward()
        torch.cuda.synchronize(device)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-fd", type=int, required=True)
    parser.add_argument("--event-fd", type=int, required=True)
    parser.add_argument("--spec", required=True)
    args = parser.parse_args(argv)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0, as the judge does
    spec = json.loads(args.spec)
    from evaluator.judge import judge

    judge_args = ["--job-fd", str(args.job_fd), "--event-fd", str(args.event_fd)]
    if not spec.get("spare"):
        # Its job is waiting already: the judge starts its worker before importing torch
        # itself, so that both imports overlap, as without the pool.
        return judge.main(judge_args)
    # A spare: the worker has time to import the extension and Triton machinery too.
    os.environ["KB_WORKER_PREIMPORT"] = "1"
    start_worker, handle = _prepare_worker(judge, spec)
    os.environ.pop("KB_WORKER_PREIMPORT", None)
    _preimport(spec["device"], spare=True)
    # Ready when the worker is: its "ready" frame waits in the pipe (left for the judge).
    if handle is not None:
        select.select([handle.channel.rfd], [], [], 600)
    judge.Events(args.event_fd).emit({"type": "spare_ready"})
    if start_worker is None:
        return judge.main(judge_args)
    return judge.main(judge_args, start_worker=start_worker)


if __name__ == "__main__":
    sys.exit(main())
