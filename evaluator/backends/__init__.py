"""The backends: one executor per kernel language, holding everything that language means.

A backend is the value a submission names (`cuda`, `triton`, ...). Everything the evaluator
and the site decide by it is read from its `Backend` here, so a new language is one module in
this package and one line in BACKENDS:

- where it runs (`gpu_only`) and what a runner needs to serve it (`packages`);
- how it builds: whether loading the kernel compiles a native extension (`builds_extension`,
  the judge then keeps the device free during a cold build) and what the worker's environment
  needs on a CPU (`cpu_env`);
- its evidence: which of the static report's kernel lists are its own kernels (`own_kernels`,
  empty for plain PyTorch, which claims none), and how the judge checks from outside the
  candidate's process that they were built and ran (`evidence`: "extension" reads the built
  library and the worker's mapped files, "triton" the kernel cache; see judge/evidence.py),
  and, for a language compiled to another one's kernels, the prefix its compiler gives the
  device kernel made from a source kernel (`kernel_prefix`: Helion's `_helion_`);
- its starter: an elementwise kernel that copies its input (`starter_kernel`, a template with
  `{name}` for the extension's name), which the site wraps around the problem's reference.

HIP (AMD) is not here because these runners have no AMD GPU: it would be one more module with
`packages=("torch",)` on a ROCm build, `builds_extension=True` and the "extension" evidence.

No torch import here: the runner, the site and `kb` read this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Backend:
    name: str  # as stored and sent: submissions, jobs, the API, `kb`
    label: str  # as people read it
    summary: str  # what a kernel of this backend is, in words (the model runs' prompts, docs)
    gpu_only: bool = False
    compiles: bool = True  # whether loading it compiles anything (plain PyTorch only loads)
    packages: tuple[str, ...] = ()  # what must import on a runner that serves it
    builds_extension: bool = False
    cpu_env: Mapping[str, str] = field(default_factory=dict)
    own_kernels: tuple[str, ...] = ()  # keys of the static report's "kernels"
    evidence: str | None = None  # "extension" or "triton" (judge/evidence.py)
    kernel_prefix: str = ""  # a device kernel's name is this + its source kernel's name
    starter_kernel: str | None = None

    @property
    def claims_kernels(self) -> bool:
        """Whether a submission in this backend claims kernels of its own (a check follows)."""
        return bool(self.own_kernels)

    def kernel_names(self, static_kernels: Mapping[str, list[str]]) -> list[str]:
        """This backend's own kernels among what the static report found in a source."""
        return [str(n) for key in self.own_kernels for n in static_kernels.get(key) or []]

    def device_kernel_names(self, static_kernels: Mapping[str, list[str]]) -> list[str]:
        """The names its own kernels have once compiled (the profiler's, the kernel cache's)."""
        return [self.kernel_prefix + n for n in self.kernel_names(static_kernels)]

    def runs_on(self, device: str) -> bool:
        return device != "cpu" or not self.gpu_only


def _all() -> dict[str, Backend]:
    from evaluator.backends import cpp, cuda, helion, pytorch, triton

    return {b.name: b for b in (cuda.BACKEND, triton.BACKEND, cpp.BACKEND, pytorch.BACKEND,
                                helion.BACKEND)}


BACKENDS: dict[str, Backend] = _all()
NAMES: tuple[str, ...] = tuple(BACKENDS)
LABELS: dict[str, str] = {b.name: b.label for b in BACKENDS.values()}


class UnknownBackend(KeyError):
    pass


def get(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise UnknownBackend(f"unknown backend {name!r}: one of {', '.join(NAMES)}") from None
