"""The backends: one executor per kernel language, holding everything that language means.

A backend is the value a submission names (`cuda`, `triton`, ...). Everything the evaluator
and the site decide by it is read from its `Backend` here, so a new language is one module in
this package and one line in BACKENDS:

- where it runs (`devices`: the kinds of runner that offer it, "cpu" and "gpu"; `gpu_only`) and
  what a runner needs to serve it (`packages`);
- how it builds: whether loading the kernel compiles a native extension (`builds_extension`,
  the judge then keeps the device free during a cold build) and what the worker's environment
  needs on a CPU (`cpu_env`);
- how the static report finds its kernels in a source: the decorators that mark one
  (`decorators`, by the full name they resolve to; each backend with decorators gets a kernel list
  of its own name in the report);
- its evidence: which of the static report's kernel lists are its own kernels (`own_kernels`,
  empty for plain PyTorch, which claims none), and how the judge checks from outside the
  candidate's process that they were built and ran (`evidence`: "extension" reads the built
  library and the worker's mapped files, "triton" the kernel cache, "cache" the language's own
  compiler cache in the build slot, `cache_env`; see judge/evidence.py), and the name its
  compiler gives the device kernel made from a source kernel `NAME`: `kernel_prefix` + NAME +
  `kernel_suffix`, followed by more where `kernel_mangled` (the arguments, a count; Helion's
  `_helion_NAME`, TileLang's `NAME_kernel`, CuTe DSL's `kernel_cutlass_NAME_...`, cuTile's
  `NAME_K...`);
- the GPUs its compiler targets (`compute_capabilities`, the majors; empty: any);
- its starter: an elementwise kernel that copies its input (`starter_kernel`, a template with
  `{name}` for the extension's name), which the site wraps around the problem's reference.

The site stores a backend as free text checked against NAMES (no choices in the database), so a
new language needs no migration: the forms, the API, the runner's detected list and the static
report all read this table.

HIP (AMD) is not here because these runners have no AMD GPU: it would be one more module with
`packages=("torch",)` on a ROCm build, `builds_extension=True` and the "extension" evidence.

No torch import here: the runner, the site and `kb` read this module.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

# A device kernel name ending in this stands for every name that begins with the rest: the
# compilers that mangle the arguments into the name (CuTe DSL, cuTile) make one per signature,
# and TileLang numbers a program's further kernels.
MANGLED = "*"


@dataclass(frozen=True)
class Backend:
    name: str  # as stored and sent: submissions, jobs, the API, `kb`
    label: str  # as people read it
    summary: str  # what a kernel of this backend is, in words (the model runs' prompts, docs)
    # The kinds of runner that offer it (gpu_runner/detect.py lists it on these): C++ is the
    # CPU's compiled language, a GPU runner offers CUDA instead.
    devices: tuple[str, ...] = ("cpu", "gpu")
    compiles: bool = True  # whether loading it compiles anything (plain PyTorch only loads)
    packages: tuple[str, ...] = ()  # what must import on a runner that serves it
    builds_extension: bool = False
    cpu_env: Mapping[str, str] = field(default_factory=dict)
    # The decorators that mark one of its kernels, by the full dotted name they resolve to (bare
    # or called with options): the static report lists those kernels under this backend's name.
    decorators: tuple[str, ...] = ()
    own_kernels: tuple[str, ...] = ()  # keys of the static report's "kernels"
    evidence: str | None = None  # "extension", "triton" or "cache" (judge/evidence.py)
    kernel_prefix: str = ""  # a device kernel's name is this + its source kernel's name ...
    kernel_suffix: str = ""  # ... + this
    kernel_mangled: bool = False  # ... + whatever its compiler appends (the arguments, a count)
    # Where its compiler writes what it builds: variable -> a folder of the build slot (one
    # folder per backend: the judge reads it for the "cache" evidence), and the settings it
    # needs for that in every worker (CuTe DSL: keep the IR it traces, which names them).
    cache_env: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    compute_capabilities: tuple[int, ...] = ()  # the majors its compiler targets; empty: any
    starter_kernel: str | None = None

    @property
    def gpu_only(self) -> bool:
        """Whether only a GPU runs it (a job on the CPU is refused)."""
        return "cpu" not in self.devices

    @property
    def claims_kernels(self) -> bool:
        """Whether a submission in this backend claims kernels of its own (a check follows)."""
        return bool(self.own_kernels)

    def kernel_names(self, static_kernels: Mapping[str, list[str]]) -> list[str]:
        """This backend's own kernels among what the static report found in a source."""
        return [str(n) for key in self.own_kernels for n in static_kernels.get(key) or []]

    @property
    def cache_folder(self) -> str | None:
        """The folder of the build slot its compiler's cache lies in (`cache_env`'s)."""
        return next(iter(self.cache_env.values()), None)

    @property
    def renames_kernels(self) -> bool:
        """Whether its compiler names a device kernel otherwise than the source kernel."""
        return bool(self.kernel_prefix or self.kernel_suffix or self.kernel_mangled)

    def device_kernel_name(self, name: str) -> str:
        """The name a source kernel has once compiled (the profiler's, the kernel cache's);
        ending in MANGLED where the compiler appends more."""
        return (self.kernel_prefix + name + self.kernel_suffix
                + (MANGLED if self.kernel_mangled else ""))

    def device_kernel_names(self, static_kernels: Mapping[str, list[str]]) -> list[str]:
        """The names its own kernels have once compiled (the profiler's, the kernel cache's)."""
        return [self.device_kernel_name(n) for n in self.kernel_names(static_kernels)]

    def runs_on(self, device: str) -> bool:
        """Whether a job on `device` ("cpu", "cuda", "cuda:1") may run it: the CPU refuses a GPU
        language; a CPU one on a GPU host is left to its author (`kb check --device cuda`), and
        runners offer only what their kind is in `devices`."""
        return device != "cpu" or not self.gpu_only

    def unsupported_arch(self, arch: str | None) -> str:
        """Why its compiler cannot target a GPU of this arch (`sm_90`), or "" where it can (or
        the arch is unknown: the self-test's kernel then says)."""
        match = re.fullmatch(r"sm_(\d+)(\d)a?", arch or "")
        if not self.compute_capabilities or match is None:
            return ""
        major, minor = int(match.group(1)), int(match.group(2))
        if major in self.compute_capabilities:
            return ""
        wanted = ", ".join(f"{m}.x" for m in self.compute_capabilities)
        return (f"{self.label} needs a GPU of compute capability {wanted}; this one is "
                f"{major}.{minor} ({arch})")


def _all() -> dict[str, Backend]:
    from evaluator.backends import cpp, cuda, cute, cutile, helion, pytorch, tilelang, triton

    # In the order the site offers them (the forms, a runner's detected list).
    return {b.name: b for b in (cuda.BACKEND, triton.BACKEND, pytorch.BACKEND, cpp.BACKEND,
                                helion.BACKEND, tilelang.BACKEND, cute.BACKEND, cutile.BACKEND)}


BACKENDS: dict[str, Backend] = _all()
NAMES: tuple[str, ...] = tuple(BACKENDS)
LABELS: dict[str, str] = {b.name: b.label for b in BACKENDS.values()}
# Where each language's compiler caches what it builds: a folder of the evaluation's build slot
# (its owner's, never shared), which the judge reads for the "cache" evidence.
CACHE_ENV: dict[str, str] = {var: folder for b in BACKENDS.values()
                             for var, folder in b.cache_env.items()}
WORKER_ENV: dict[str, str] = {var: value for b in BACKENDS.values() for var, value in b.env.items()}


def offered_on(kind: str) -> list[str]:
    """The backends a runner of this kind ("cpu" or "gpu") offers before its self-test, in the
    table's order."""
    return [b.name for b in BACKENDS.values() if kind in b.devices]


# What a source that builds an extension names, whatever backend it was submitted as.
EXTENSION_WORDS = ("cpp_extension", "load_inline")


class UnknownBackend(KeyError):
    pass


def builds_extension(backend: str, source: str) -> bool:
    """Whether loading this source compiles a native extension (torch.utils.cpp_extension):
    its backend's way, or a source submitted as another backend that builds one all the same."""
    return get(backend).builds_extension or any(word in source for word in EXTENSION_WORDS)


def get(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise UnknownBackend(f"unknown backend {name!r}: one of {', '.join(NAMES)}") from None
