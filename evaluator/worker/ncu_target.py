"""What ncu runs inside the candidate's sandbox (ncu.py): build ModelNew as an evaluation's
worker does (the same load path, so the owner's cached build is found), call it once to compile
and warm up, then once between cudaProfilerStart and cudaProfilerStop. ncu is started with
--profile-from-start off, so only that call's kernels are measured.

    python -m evaluator.worker.ncu_target JOB.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    job = json.loads(Path(args[0]).read_text())
    device = job["device"]

    from evaluator.process import apply_limits, resolve_limits

    apply_limits(resolve_limits(job["limits"], device != "cpu"))
    import torch

    from evaluator.loading import (
        derive_seed,
        make_init_inputs,
        make_inputs,
        module_from_source,
        synchronize,
    )
    from evaluator.worker.base import Worker

    seed = int(job["seed"])
    init_seed = derive_seed(seed, "init")
    reference = module_from_source(job["reference_source"], "kb_reference")
    init_inputs = make_init_inputs(reference, init_seed)
    inputs = make_inputs(reference, derive_seed(seed, "ncu"), device, job["precision"])
    worker = Worker(None, device)
    reply, _ = worker.load({"source": job["candidate_source"], "backend": job["backend"],
                            "build_dir": str(Path(args[0]).parent), "init_seed": init_seed,
                            "precision": job["precision"]}, init_inputs)
    if not reply.get("ok"):
        print(f"the kernel did not load: {reply.get('error')}", file=sys.stderr)
        return 3
    model = worker.model
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
