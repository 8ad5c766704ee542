"""What ncu runs inside the candidate's sandbox (ncu.py): build ModelNew as an evaluation's
worker does (the same load path, so the owner's cached build is found), call it once to compile
and warm up, then once between cudaProfilerStart and cudaProfilerStop. ncu is started with
--profile-from-start off, so only that call's kernels are measured.

The call's inputs come drawn (INPUTS.pt, plain tensors written by the runner from the problem's
get_inputs(), outside the sandbox): the reference never enters this process, which runs the
candidate's code.

    python -m evaluator.worker.ncu_target JOB.json INPUTS.pt
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


class NotLoaded(Exception):
    """The kernel did not build or construct."""


def prepare(job: dict, inputs_path: Path, *, build_dir: Path | None = None) -> tuple[Any, list]:
    """The candidate's model, built as an evaluation's worker builds it (in `build_dir`, by
    default the inputs' folder), and the call's inputs on the job's device."""
    import torch

    from evaluator.loading import PRECISION_DTYPES, cast_value, derive_seed
    from evaluator.worker.base import Worker

    device, precision = job["device"], job["precision"]
    drawn = torch.load(inputs_path, weights_only=True)
    inputs = cast_value(list(drawn["inputs"]), device, PRECISION_DTYPES[precision])
    worker = Worker(None, device)
    reply, _ = worker.load({"source": job["candidate_source"], "backend": job["backend"],
                            "build_dir": str(build_dir or inputs_path.parent),
                            "init_seed": derive_seed(int(job["seed"]), "init"),
                            "precision": precision}, list(drawn["init_inputs"]))
    if not reply.get("ok"):
        raise NotLoaded(str(reply.get("error")))
    return worker.model, inputs


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    job_path = Path(args[0])
    job = json.loads(job_path.read_text())
    device = job["device"]

    from evaluator.process import apply_limits, resolve_limits

    apply_limits(resolve_limits(job["limits"], device != "cpu"))
    import torch

    from evaluator.loading import synchronize

    try:
        model, inputs = prepare(job, Path(args[1]), build_dir=job_path.parent)
    except NotLoaded as exc:
        print(f"the kernel did not load: {exc}", file=sys.stderr)
        return 3
    with torch.no_grad():
        model(*inputs)  # compiles, autotunes and warms up outside the measured range
        synchronize(device)
        torch.cuda.profiler.start()
        model(*inputs)
        synchronize(device)
        torch.cuda.profiler.stop()
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
