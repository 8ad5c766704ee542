"""A runner's self-test: which backends it can really serve.

A backend is offered on a hardware only when this runner can run it end to end: its packages
import here, and its starter kernel on a tiny elementwise problem is judged `correct` through
the real path (the sandbox, the judge, the worker), untimed. A language whose package is
missing, whose compiler fails on this host, whose compiler does not target this GPU (cuTile on
a Hopper GPU, `Backend.compute_capabilities`) or whose kernels cannot launch here is simply not
offered, and the reason is said in the runner's log (a CPU host never offers CUDA).

Builds go to the runner's build cache under an owner of their own, so a restart finds them
compiled; nothing of a user's build is touched.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Iterable
from typing import Any

from evaluator import backends
from evaluator.backends.starters import starter_file

OWNER = "runner-self-test"
REFERENCE = '''import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4, 256)]


def get_init_inputs():
    return []
'''


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # `cuda.tile` without its parent package `cuda`
        return False


def missing_packages(backend: backends.Backend) -> list[str]:
    return [name for name in backend.packages if not _installed(name)]


def self_test(device: str, names: Iterable[str], *, build_dir: str | None,
              run: Callable[[dict], dict] | None = None,
              arch: str | None = None) -> dict[str, dict[str, Any]]:
    """{backend: {"served": bool, "why": str, "seconds": float}} for each of `names` (in
    order); `run` is the evaluator's run_job unless a caller passes another; `arch` is the
    GPU's (`sm_90`), for the backends whose compiler targets only some GPUs."""
    if run is None:
        from evaluator.runner.sandbox import run_job as run
    report: dict[str, dict[str, Any]] = {}
    for name in names:
        started = time.monotonic()
        backend = backends.get(name)
        why = ""
        if not backend.runs_on(device):
            why = "it needs a CUDA device"
        elif device != "cpu" and (unsupported := backend.unsupported_arch(arch)):
            why = unsupported
        elif missing := missing_packages(backend):
            why = f"{', '.join(missing)} is not installed"
        else:
            result = run(_job(name, device, build_dir))
            if result.get("verdict") != "correct":
                why = (f"its self-test kernel was {result.get('verdict')}: "
                       f"{str(result.get('error') or '')[:300]}")
        report[name] = {"served": not why, "why": why,
                        "seconds": round(time.monotonic() - started, 2)}
    return report


def _job(backend: str, device: str, build_dir: str | None) -> dict[str, Any]:
    return {
        "mode": "evaluate", "reference_source": REFERENCE, "backend": backend,
        "candidate_source": starter_file(REFERENCE, backend, slug="runner_self_test"),
        "precision": "fp32", "device": device, "n_trials": 1, "measure": False,
        "time_limit_s": 300, "build_dir": build_dir, "build_owner": OWNER,
        "profile_process": False,
    }
