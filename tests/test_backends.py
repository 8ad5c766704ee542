"""The backends' executors (evaluator/backends/): one entry per kernel language, read by the
evaluator, the site's forms, labels, starters and prompts. These hold the table together."""

from __future__ import annotations

import ast
import importlib.util
import types
from pathlib import Path

import pytest

from evaluator import backends
from evaluator.config import JobError, normalize_job
from evaluator.static_report import analyze
from kbsite.templatetags.kbsite_tags import LABELS, UNCOMPILED_BACKENDS, label_table

PLAIN_TORCH = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
              "        return torch.relu(x)\n"


def test_a_submission_names_a_backend_of_the_table_which_the_database_does_not_list():
    from submissions.models import Submission

    # No choices: the service checks the name against the table (tests/test_backend_table.py).
    field = Submission._meta.get_field("backend")
    assert not field.choices and max(map(len, backends.NAMES)) <= field.max_length


def test_a_cpu_runner_offers_what_the_table_runs_on_a_cpu():
    from gpu_runner.detect import detect

    # C++ is the CPU's compiled language (a GPU runner's is CUDA); Triton runs interpreted.
    assert backends.offered_on("cpu") == ["triton", "torch", "cpp"] == detect("cpu")["backends"]
    assert [n for n in backends.NAMES if backends.get(n).gpu_only] == [
        n for n in backends.NAMES if n not in backends.offered_on("cpu")]


@pytest.mark.parametrize("name", backends.NAMES)
def test_a_backend_that_claims_kernels_says_how_they_are_checked_and_started(name):
    backend = backends.get(name)
    assert backend.label and backend.summary and LABELS[name] == backend.label
    if backend.claims_kernels:
        assert backend.evidence in ("extension", "triton", "cache")
        # A compiler cache the judge reads is one the sandbox points into the build slot.
        assert (backend.evidence == "cache") == bool(backend.cache_env)
        assert backend.starter_kernel and "pass_through" in backend.starter_kernel
        # The starter's kernel is Python once its extension is named.
        ast.parse(backend.starter_kernel.format(name="kb_starter_x"))
    else:
        assert backend.evidence is None and backend.starter_kernel is None


@pytest.mark.parametrize("name", [n for n in backends.NAMES if backends.get(n).claims_kernels])
def test_a_plain_pytorch_file_claimed_as_another_backend_is_named_in_the_static_report(name):
    report = analyze(PLAIN_TORCH, backend=name)
    assert any(f["detail"] == f"claims {name} but defines no {name} kernel"
               for f in report["findings"]), report["findings"]


def test_a_job_is_refused_for_a_backend_its_device_cannot_run_or_one_nobody_knows():
    job = {"reference_source": "", "candidate_source": "", "device": "cpu"}
    for name in backends.NAMES:
        if backends.get(name).gpu_only:
            with pytest.raises(JobError, match="needs a CUDA device"):
                normalize_job({**job, "backend": name})
        else:
            assert normalize_job({**job, "backend": name})["backend"] == name
    with pytest.raises(JobError, match="unknown backend"):
        normalize_job({**job, "backend": "fortran"})
    with pytest.raises(backends.UnknownBackend):
        backends.get("fortran")


def test_the_pages_scripts_read_the_same_labels_as_the_templates():
    html = str(label_table())
    assert 'id="kb-labels"' in html and '"C++"' in html and '"PyTorch"' in html
    assert list(UNCOMPILED_BACKENDS) == ["torch"]


@pytest.mark.slow
def test_a_runner_offers_only_the_backends_its_self_test_passes_through_the_sandbox(tmp_path):
    """Real processes: each backend's starter is judged in the sandbox, as a runner does at start
    (C++ is left out here only because its cold build takes half a minute)."""
    from gpu_runner.detect import self_tested

    lines: list[str] = []
    served = self_tested({"kind": "cpu", "backends": ["torch", "triton", "cuda"]},
                         build_dir=str(tmp_path), log=lines.append)
    assert served == ["torch", "triton"]
    assert any(line.startswith("self-test: torch served") for line in lines)
    assert "self-test: cuda not offered: it needs a CUDA device" in lines


def _hide_package(monkeypatch, package: str) -> None:
    """As on a runner where `package` is not installed: its import spec is not found."""
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == package else real_find_spec(name, *a))


def test_a_backend_whose_package_is_missing_or_whose_kernel_fails_is_not_offered(monkeypatch):

    from gpu_runner.detect import self_tested

    _hide_package(monkeypatch, "triton")
    jobs: list[dict] = []

    def run(job: dict) -> dict:
        jobs.append(job)
        return {"verdict": "compile_error", "error": "error: no member named 'x'"}

    lines: list[str] = []
    served = self_tested({"kind": "cpu", "backends": ["triton", "cpp"]}, build_dir=None,
                         log=lines.append, run=run)
    assert served == []
    assert lines == ["self-test: triton not offered: triton is not installed",
                     "self-test: cpp not offered: its self-test kernel was compile_error: "
                     "error: no member named 'x'"]
    # The self-test's build is its own owner's, never a user's, and nothing is timed.
    assert [(j["backend"], j["build_owner"], j["measure"]) for j in jobs] == [
        ("cpp", "runner-self-test", False)]


# ---- Helion: PyTorch-like kernels over tiles, compiled to Triton on a GPU ----------------------

def test_helion_is_a_gpu_backend_whose_kernels_are_checked_in_the_triton_cache():
    helion = backends.get("helion")
    assert "helion" in backends.NAMES and LABELS["helion"] == "Helion"
    assert helion.gpu_only and not helion.runs_on("cpu") and helion.runs_on("cuda")
    assert helion.packages == ("torch", "triton", "helion")
    assert (helion.own_kernels, helion.evidence) == (("helion",), "triton")
    # `@helion.kernel def f` runs as the Triton kernel `_helion_f`.
    assert helion.device_kernel_names({"helion": ["f"], "triton": ["g"]}) == ["_helion_f"]
    assert backends.get("triton").device_kernel_names({"helion": ["f"], "triton": ["g"]}) == ["g"]


def test_the_helion_starter_pins_its_config_and_is_the_backends_own_kernel():
    from evaluator.backends.starters import starter_file
    from evaluator.runner.selftest import REFERENCE

    source = starter_file(REFERENCE, "helion", slug="level1/19_ReLU")
    ast.parse(source)
    # One config given: Helion compiles it and autotunes nothing.
    assert "@helion.kernel(config=helion.Config(block_sizes=[1024], num_warps=4))" in source
    assert "for tile in hl.tile(x.size(0)):" in source and "view(-1)" in source
    report = analyze(source, reference_source=REFERENCE, backend="helion")
    assert report["kernels"]["helion"] == ["pass_through_kernel"]
    assert report["kernels"]["triton"] == []
    assert not [f for f in report["findings"] if f["pattern"] == "backend"], report["findings"]


def test_a_cpu_host_never_offers_helion():
    from gpu_runner.detect import detect, self_tested

    assert "helion" not in detect("cpu")["backends"]

    jobs: list[str] = []

    def run(job: dict) -> dict:
        jobs.append(job["backend"])
        return {"verdict": "correct"}

    lines: list[str] = []
    served = self_tested({"kind": "cpu", "backends": ["torch", "helion"]}, build_dir=None,
                         log=lines.append, run=run)
    assert served == ["torch"] and jobs == ["torch"]  # nothing of Helion's is run
    assert "self-test: helion not offered: it needs a CUDA device" in lines


def test_a_gpu_runner_without_helion_installed_offers_the_rest_and_says_why(monkeypatch):

    from gpu_runner.detect import self_tested

    _hide_package(monkeypatch, "helion")
    jobs: list[str] = []

    def run(job: dict) -> dict:
        jobs.append(job["backend"])
        return {"verdict": "correct"}

    lines: list[str] = []
    served = self_tested({"kind": "gpu", "backends": ["cuda", "triton", "torch", "helion"]},
                         build_dir=None, log=lines.append, run=run)
    assert served == ["cuda", "triton", "torch"] and jobs == ["cuda", "triton", "torch"]
    assert lines[-1] == "self-test: helion not offered: helion is not installed"


def test_a_call_of_the_candidates_helion_kernel_counts_as_its_own_in_the_profiled_call(
    tmp_path, monkeypatch
):
    """Helion writes the Triton kernel it generates outside the candidate's folder, so the
    worker's probe counts the call of the helion.Kernel whose function is the candidate's."""
    import sys
    import types

    from evaluator.worker.probe import OwnCodeProfile

    class Kernel:  # helion.runtime.kernel.Kernel's shape: the decorated function as `fn`
        def __init__(self, fn):
            self.fn = fn

        def __call__(self, *args):
            return self.fn(*args)

    # No extension of the candidate's here (and the test process's gc holds dead weak proxies).
    monkeypatch.setattr(OwnCodeProfile, "_extension_functions", lambda self: (set(), set()))
    module = types.ModuleType("helion.runtime.kernel")
    module.Kernel = Kernel
    monkeypatch.setitem(sys.modules, "helion.runtime.kernel", module)
    candidate, elsewhere = {}, {}
    exec(compile("def double(x):\n    return 2 * x\n", str(tmp_path / "candidate.py"), "exec"),
         candidate)
    exec(compile("def triple(x):\n    return 3 * x\n", "/elsewhere/lib.py", "exec"), elsewhere)
    own = OwnCodeProfile(str(tmp_path))
    sys.setprofile(own.hook)
    try:
        results = Kernel(candidate["double"])(3), Kernel(elsewhere["triple"])(3)
    finally:
        sys.setprofile(None)
    assert results == (6, 9)
    assert (own.calls, own.names) == (1, {"double"})


def test_the_triton_evidence_finds_a_helion_kernel_under_its_generated_name(tmp_path):
    from evaluator.judge.evidence import triton_evidence

    def check(prefix: str) -> dict:
        return triton_evidence(["copy"], source_kernels=["copy"], build_root=tmp_path,
                               on_gpu=True, prefix=prefix)

    assert check("_helion_")["missing"] == (
        "no compiled artifact of the reported kernels in the slot")
    (tmp_path / "triton" / "KEY").mkdir(parents=True)
    (tmp_path / "triton" / "KEY" / "_helion_copy.cubin").write_bytes(b"\0")
    helion = check("_helion_")
    assert helion["ok"] and helion["compiled"] == ["copy"]
    # A @triton.jit kernel `copy` is not compiled as `_helion_copy`.
    assert not check("")["ok"]


# ---- TileLang, CuTe DSL, cuTile: languages whose package compiles and launches the kernels -------

# name: (label, packages, cache variables, folder, the device name of a source kernel `copy`,
#        names the profiler may show for it, names it must not take for it). The long names are
#        the compilers' own for the starter's kernel, renamed `copy` (CuTe DSL 4.8.1 traced,
#        cuTile 1.7.0 lowered on a CPU host).
LANGUAGES = {
    "tilelang": ("TileLang", ("torch", "tilelang"), ("TILELANG_CACHE_DIR",), "tilelang",
                 "copy_kernel*", ["copy_kernel", "copy_kernel_1"],
                 ["copy", "my_copy_kernel", "xcopy_kernel"]),
    "cute": ("CuTe DSL", ("torch", "cutlass"), ("CUTE_DSL_CACHE_DIR", "CUTE_DSL_DUMP_DIR"), "cute",
             "kernel_cutlass_copy_*", [
                 "kernel_cutlass_copy_0",
                 "kernel_cutlass_copy_tensorptrf32generico10001_tensorptrf32generico10001__0"],
             ["copy", "kernel_cutlass_copyx_0", "cutlass_copy_0"]),
    "cutile": ("cuTile", ("torch", "cuda.tile"), ("CUDA_TILE_CACHE_DIR",), "cutile", "copy_K*",
               ["copy_Kt1_A1f32_1l0_A1f32_1l0_I1024", "copy_Kt2_Sf32"],
               ["copy", "my_copy_Kt2", "copy_kernel"]),
}
GPU_BACKENDS = ["cuda", "triton", "torch", "helion", "tilelang", "cute", "cutile"]


def _fake_packages(monkeypatch, *packages: str) -> None:
    """As on a runner where `packages` are installed (this host has none of them)."""
    import importlib.machinery
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: (
        importlib.machinery.ModuleSpec(name, None) if name in packages
        else real_find_spec(name, *a)))


@pytest.mark.parametrize("name", LANGUAGES)
def test_each_kernel_language_is_a_gpu_backend_known_by_its_compiled_kernels_names(name):
    from evaluator.judge.exploits import kernel_profile

    label, packages, variables, folder, device, ran, others = LANGUAGES[name]
    backend = backends.get(name)
    assert name in backends.NAMES and LABELS[name] == label == backend.label
    assert backend.gpu_only and not backend.runs_on("cpu") and backend.runs_on("cuda")
    assert backend.packages == packages and backend.own_kernels == (name,)
    assert backend.evidence == "cache" and backend.cache_folder == folder
    assert dict(backend.cache_env) == dict.fromkeys(variables, folder)
    assert all(backends.CACHE_ENV[variable] == folder for variable in variables)
    assert backend.device_kernel_names({name: ["copy"], "triton": ["g"]}) == [device]
    # The profiler's table marks a kernel the candidate's when its compiler named it so.
    reply = {"device_total_us": 10.0, "device_kernels": [[k, 1.0] for k in ran + others]}
    rows = kernel_profile(reply, [device])["candidate"]["kernels"]
    assert [r["name"] for r in rows if r["own"]] == ran


def test_the_gpu_runner_lists_every_language_of_the_table_and_hip_is_one_more_entry():
    source = (Path(__file__).resolve().parent.parent / "gpu_runner" / "detect.py").read_text()
    assert backends.offered_on("gpu") == GPU_BACKENDS
    assert '"backends": backends.offered_on("gpu")' in source
    assert "HIP" in backends.__doc__


@pytest.mark.parametrize("name", LANGUAGES)
def test_each_languages_starter_compiles_names_the_reference_and_pins_its_tuning(name):
    from evaluator.backends.starters import starter_file
    from evaluator.runner.selftest import REFERENCE

    source = starter_file(REFERENCE, name, slug="level1/19_ReLU")
    compile(source, f"{name}_starter.py", "exec")
    # The problem's own shape: its Model as Reference, inputs included, which ModelNew inherits.
    assert "class ModelNew(Reference):" in source and "torch.randn(4, 256)" in source
    assert "autotune(" not in source and "view(-1)" in source
    pinned = {"tilelang": "def pass_through_program(n, dtype, block=1024, threads=256):",
              "cute": "THREADS = 256", "cutile": "TILE = 1024"}
    assert pinned[name] in source
    kernels = {"tilelang": ["pass_through_program", "pass_through_kernel"],
               "cute": ["pass_through_kernel", "pass_through_launch"],
               "cutile": ["pass_through_kernel"]}
    report = analyze(source, reference_source=REFERENCE, backend=name)
    assert report["kernels"][name] == kernels[name] and report["kernels"]["triton"] == []
    assert not [f for f in report["findings"] if f["pattern"] == "backend"], report["findings"]


def test_a_cpu_host_never_offers_the_kernel_languages():
    from gpu_runner.detect import detect, self_tested

    assert not set(LANGUAGES) & set(detect("cpu")["backends"])
    jobs: list[str] = []
    lines: list[str] = []
    served = self_tested({"kind": "cpu", "backends": ["torch", *LANGUAGES]}, build_dir=None,
                         log=lines.append, run=lambda job: jobs.append(job["backend"]) or {
                             "verdict": "correct"})
    assert served == ["torch"] and jobs == ["torch"]
    for name in LANGUAGES:
        assert f"self-test: {name} not offered: it needs a CUDA device" in lines


def test_a_gpu_runner_names_each_missing_languages_package(monkeypatch):
    from gpu_runner.detect import self_tested

    _fake_packages(monkeypatch, "helion")
    for package in ("tilelang", "cutlass"):
        _hide_package(monkeypatch, package)
    # `cuda.tile` without the `cuda` namespace package: find_spec raises instead of saying None.
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: (
        _raise(ModuleNotFoundError("No module named 'cuda'")) if name == "cuda.tile"
        else real_find_spec(name, *a)))
    jobs: list[str] = []
    lines: list[str] = []
    served = self_tested({"kind": "gpu", "arch": "sm_100", "backends": GPU_BACKENDS},
                         build_dir=None, log=lines.append,
                         run=lambda job: jobs.append(job["backend"]) or {"verdict": "correct"})
    assert served == jobs == ["cuda", "triton", "torch", "helion"]
    assert lines[-3:] == ["self-test: tilelang not offered: tilelang is not installed",
                          "self-test: cute not offered: cutlass is not installed",
                          "self-test: cutile not offered: cuda.tile is not installed"]


def _raise(exc: Exception):
    raise exc


@pytest.mark.parametrize(("arch", "offered"), [("sm_90", False), ("sm_100", True),
                                               ("sm_120", True), ("sm_80", True),
                                               ("sm_89", True)])
def test_cutile_is_offered_only_on_a_gpu_its_compiler_targets(monkeypatch, arch, offered):
    """tileiras 13.2 (cuda-tile 1.7.0) targets Ampere/Ada and Blackwell, not Hopper yet: an
    H100 or H200 (sm_90) never offers cuTile, with or without the self-test."""
    from gpu_runner.detect import self_tested, untested

    _fake_packages(monkeypatch, "tilelang", "cutlass", "cuda.tile")
    detected = {"kind": "gpu", "arch": arch, "backends": ["torch", "tilelang", "cute", "cutile"]}
    jobs: list[str] = []
    lines: list[str] = []
    served = self_tested(detected, build_dir=None, log=lines.append,
                         run=lambda job: jobs.append(job["backend"]) or {"verdict": "correct"})
    assert ("cutile" in served) == ("cutile" in jobs) == offered
    assert served[:3] == ["torch", "tilelang", "cute"]
    why = (f"cuTile needs a GPU of compute capability 8.x, 10.x, 11.x, 12.x; this one is "
           f"{arch[3:-1]}.{arch[-1]} ({arch})")
    assert (f"self-test: cutile not offered: {why}" in lines) == (not offered)
    without: list[str] = []
    assert ("cutile" in untested(detected, log=without.append)) == offered
    assert without == ([] if offered else [f"cutile not offered: {why}"])


def test_the_sandbox_points_each_languages_compiler_cache_into_the_build_slot(tmp_path):
    from evaluator import launcher
    from evaluator.runner.sandbox import scrubbed_env

    env = scrubbed_env({"build_dir": str(tmp_path / "slot"), "device": "cuda",
                        "backend": "cute"}, tmp_path)
    inside = launcher.sandbox_env(env)
    for _label, _packages, variables, folder, *_ in LANGUAGES.values():
        for variable in variables:
            assert env[variable] == str(tmp_path / "slot" / folder)
            assert inside[variable] == f"{launcher.BUILD}/{folder}"
    # cute.compile writes nothing to the DSL's cache: its traced IR, kept, names the kernels.
    assert env["CUTE_DSL_KEEP"] == inside["CUTE_DSL_KEEP"] == "ir-debug"


def _profile_calls(tmp_path, monkeypatch, modules: dict, calls) -> tuple[int, set[str], tuple]:
    """Run `calls(candidate, elsewhere)` under the worker's profile hook, with `modules` standing
    in for the language's package; the candidate's functions live in tmp_path/candidate.py, and
    `launch(launcher, *args)` of each file calls `launcher(*args)`."""
    import sys

    from evaluator.worker.probe import OwnCodeProfile

    source = "def double(x):\n    return 2 * x\n\n\ndef launch(launcher, *args):\n" \
             "    return launcher(*args)\n"
    candidate, elsewhere = {}, {}
    exec(compile(source, str(tmp_path / "candidate.py"), "exec"), candidate)
    exec(compile(source, "/elsewhere/lib.py", "exec"), elsewhere)
    monkeypatch.setattr(OwnCodeProfile, "_extension_functions", lambda self: (set(), set()))
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    own = OwnCodeProfile(str(tmp_path))
    sys.setprofile(own.hook)
    try:
        results = calls(candidate, elsewhere)
    finally:
        sys.setprofile(None)
    return own.calls, own.names, results


def _module(name: str, **attributes) -> types.ModuleType:
    module = types.ModuleType(name)
    vars(module).update(attributes)
    return module


def test_a_launch_of_the_candidates_tilelang_kernel_counts_as_its_own(tmp_path, monkeypatch):
    """TileLang runs the library it built in its cache: the probe counts a call of a JITKernel
    made from the candidate's program, or called by the candidate's code."""

    class Program:  # what T.prim_func builds: the Python function as `orig_func`
        def __init__(self, fn):
            self.orig_func = fn

    class JITKernel:  # tilelang.jit.kernel.JITKernel's shape: the program as `prim_func`
        def __init__(self, fn=None):
            self.prim_func = Program(fn) if fn else None

        def __call__(self, x):
            return x + 1

    def calls(candidate, elsewhere):
        return (JITKernel(candidate["double"])(1),  # the candidate's program
                candidate["launch"](JITKernel(), 2),  # one loaded from the cache, its call
                elsewhere["launch"](JITKernel(elsewhere["double"]), 3), JITKernel()(4))

    counted = _profile_calls(tmp_path, monkeypatch, {"tilelang.jit.kernel": _module(
        "tilelang.jit.kernel", JITKernel=JITKernel)}, calls)
    assert counted == (2, {"double", "tilelang kernel"}, (2, 3, 4, 5))


def test_a_launch_of_the_candidates_cute_kernel_counts_as_its_own(tmp_path, monkeypatch):
    """CuTe DSL: a @cute.jit function called from Python (the DSL's jit_wrapper holding it as
    `func`), or a function cute.compile compiled, called by the candidate's code."""

    class BaseDSL:
        @staticmethod
        def jit_runner(func):
            def decorator(func):
                def jit_wrapper(*args):
                    return func(*args)
                return jit_wrapper
            return decorator(func)

    class JitCompiledFunction:
        def __init__(self, name):
            self.function_name = name

        def __call__(self, x):
            return x + 1

    class CudaDialectJitCompiledFunction(JitCompiledFunction):
        def __call__(self, x):
            return super().__call__(x)

    def calls(candidate, elsewhere):
        compiled = CudaDialectJitCompiledFunction("cutlass_launch_Int32")
        return (BaseDSL.jit_runner(candidate["double"])(1),
                BaseDSL.jit_runner(elsewhere["double"])(1),
                candidate["launch"](compiled, 2), elsewhere["launch"](compiled, 3), compiled(4))

    counted = _profile_calls(tmp_path, monkeypatch, {
        "cutlass.base_dsl.dsl": _module("cutlass.base_dsl.dsl", BaseDSL=BaseDSL),
        "cutlass.base_dsl.jit_executor": _module(
            "cutlass.base_dsl.jit_executor", JitCompiledFunction=JitCompiledFunction)}, calls)
    assert counted == (2, {"double", "cutlass_launch_Int32"}, (2, 2, 3, 4, 5))


def test_a_cutile_launch_by_the_candidates_code_counts_as_its_own(tmp_path, monkeypatch):
    """cuTile's launch is a C function that takes the kernel as an argument: the probe counts
    the calls the candidate's code makes."""
    import math

    def calls(candidate, elsewhere):
        return candidate["launch"](math.hypot, 3, 4), elsewhere["launch"](math.hypot, 6, 8)

    counted = _profile_calls(tmp_path, monkeypatch, {"cuda.tile._cext": _module(
        "cuda.tile._cext", launch=math.hypot)}, calls)
    assert counted == (1, {"cuda.tile.launch"}, (5.0, 10.0))


@pytest.mark.parametrize("name", LANGUAGES)
def test_the_cache_evidence_finds_a_kernel_under_the_name_its_compiler_gives_it(tmp_path, name):
    from evaluator.judge.evidence import cache_evidence

    backend = backends.get(name)
    _label, _packages, _variable, folder, _device, ran, _others = LANGUAGES[name]

    def check(reported: list[str]) -> dict:
        return cache_evidence(reported, source_kernels=["copy"], build_root=tmp_path,
                              device_names={"copy": backend.device_kernel_name("copy").
                                            removesuffix(backends.MANGLED)},
                              folder=folder, on_gpu=True)

    assert check(["torch_copy"])["missing"] == (
        "the reported kernels are not kernels of the source in its language")
    assert check(["copy"])["missing"] == (
        f"no compiled artifact of the reported kernels in the slot's {folder} cache")
    # A file of another language's cache, or one that names only the source kernel, is none.
    (tmp_path / "triton").mkdir()
    (tmp_path / "triton" / f"{ran[0]}.cubin").write_bytes(ran[0].encode())
    (tmp_path / folder / "KEY").mkdir(parents=True)
    (tmp_path / folder / "KEY" / "copy.txt").write_text("copy")
    assert not check(["copy"])["ok"]
    (tmp_path / folder / "KEY" / "artifact").write_bytes(b"\0\1" + ran[-1].encode() + b"\0")
    found = check(["copy"])
    assert found["ok"] and found["compiled"] == ["copy"] and found["cache"] == folder
