#!/usr/bin/env python3
"""GPU check of the evaluator (issue 3), in one command on an H200. No Django.

    python3 scripts/gpu_check.py --problems gpu_kernels/problems

For six KernelBench level 1 and 2 problems it evaluates our own right kernel (5 times: the
spread of the median across fresh evaluations) and a subtly wrong one (gpu_kernels/<slug>/);
then a segfaulting, a hanging, an illegal-memory-access and an out-of-memory kernel, each
followed by a normal evaluation on the same runner; and shows that re-evaluating a compiled
CUDA kernel spends no time compiling. Prints a table, writes every result as JSON (--out, or
$OUT/gpu_check.json when $OUT is set), and exits 0 only when every expectation holds.

    python3 scripts/gpu_check.py --problems .kernelbench --only exploits

runs the adversarial suite instead (issue 9): the GPU-only exploit kernels of
gpu_kernels/exploits/, the CPU suite's kernels (tests/exploits/kernels/) on the GPU, and honest
kernels that must pass with no flag; it prints, for each exploit class, the kernel, the verdict
and flags it got and whether that is the expected one (results in $OUT/gpu_exploits.json).

    python3 scripts/gpu_check.py --problems .kernelbench --only verdicts

evaluates our own kernels of gpu_kernels/verdicts/ the same way (issue 21): level-2 library GEMMs
with a fused Triton epilogue (correct, ranked, their own kernels' share shown), pure copy
wrappers (never ranked above the PyTorch reference), a level-1 Triton matmul at tl.dot's default
TF32 (incorrect, with the TF32 hint in its diagnosis) and the same with input_precision="ieee"
(correct), and a Triton kernel that never runs (backend_not_used). It prints a table of the
verdict, exploit flags, notes, own-kernel share, speedup and TF32 hint of each, exits non-zero
when an expectation fails, and writes $OUT/gpu_verdicts.json. Without a GPU it says so and exits
2; `--device cpu --smoke` runs the cases that need none through Triton's interpreter (plumbing).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluator.runner import pool  # noqa: E402
from evaluator.runner.sandbox import run_job  # noqa: E402

KERNELS = REPO / "gpu_kernels"

# (problem slug, backend of our kernels)
CASES = [
    ("level1/12_Matmul_with_diagonal_matrices_", "cuda"),
    ("level1/88_MinGPTNewGelu", "triton"),
    ("level1/1_Square_matrix_multiplication_", "triton"),
    ("level2/76_Gemm_Add_ReLU", "cuda"),
    ("level2/12_Gemm_Multiply_LeakyReLU", "triton"),
    ("level2/86_Matmul_Divide_GELU", "cuda"),
]
# Fault kernels run against this problem; after each, its right kernel must still pass.
FAULT_PROBLEM = "level1/12_Matmul_with_diagonal_matrices_"
FAULTS = [
    # (file, backend, expected verdict, text expected in the error)
    ("segfault", "torch", "runtime_error", "SIGSEGV"),
    ("hang", "triton", "timeout", "time limit"),
    ("illegal_access", "triton", "runtime_error", "illegal memory access"),
    ("oom", "torch", "out_of_memory", ""),
]
TIMING = {"warmup": 5, "min_reps": 20, "max_reps": 500, "target_rel_err": 0.002,
          "max_seconds": 3.0, "sets": 3}
MAX_SPREAD = 0.02  # each repeated median within 2 % of the first (issue 3)


# Tiny sizes for --smoke (a plumbing check on the CPU through Triton's interpreter).
SMOKE_SIZES = {"batch_size": 64, "dim": 96, "N": 256, "M": 256, "in_features": 128,
               "out_features": 256, "input_size": 128, "output_size": 256}


def load_problem(problems: Path, slug: str, smoke: bool = False,
                 sizes: dict[str, int] | None = None) -> str:
    path = problems / f"{slug}.py"
    if not path.exists():
        sys.exit(f"problem file missing: {path} (pass the folder with --problems)")
    source = path.read_text()
    for name, value in (SMOKE_SIZES if smoke else sizes or {}).items():
        source = re.sub(rf"^{name}\s*=.*$", f"{name} = {value}", source, flags=re.M)
    return source


def evaluate(args: argparse.Namespace, slug: str, kernel: Path, backend: str, **extra: Any) -> dict:
    job = {
        "mode": "evaluate",
        "reference_source": load_problem(args.problems, slug, args.smoke),
        "candidate_source": kernel.read_text(),
        "backend": backend,
        "precision": "fp32",
        "device": args.device,
        "seed": int.from_bytes(os.urandom(6), "little"),
        "n_trials": 5,
        "timing": dict(TIMING),
        "build_dir": args.build_dir,
        "time_limit_s": 300,
    }
    job.update(extra)
    started = time.monotonic()
    result = run_job(job)
    result["wall_s"] = time.monotonic() - started
    result["problem"], result["kernel"] = slug, str(kernel.relative_to(REPO))
    return result


def fmt_ms(stats: dict | None) -> str:
    return f"{stats['median_ms']:.4f}" if stats else "-"


def short(result: dict) -> str:
    return (result.get("error") or "").replace("\n", " ")[:90]


def _sandbox_words(sandbox: dict | None) -> str:
    """The candidate's sandbox as the result describes it, in a few words."""
    if not sandbox:
        return "-"
    return (f"{sandbox.get('engine')} uid {sandbox.get('candidate_uid')} seccomp "
            f"{sandbox.get('seccomp')} namespaces {','.join(sandbox.get('namespaces') or [])} "
            f"tmpfs {sandbox.get('tmpfs_mb')} MiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--problems", type=Path, default=REPO.parent / "shared" / "kernelbench",
                        help="folder with level1/, level2/ KernelBench files")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--build-dir", default=None, help="extension cache (default: a temp dir)")
    parser.add_argument("--only", default="",
                        help="run only problems whose slug contains this; `exploits`: run the "
                             "adversarial suite only; `verdicts`: our kernels of "
                             "gpu_kernels/verdicts/ and the verdicts they get (issue 21)")
    parser.add_argument("--skip-faults", action="store_true")
    parser.add_argument("--faults", default=",".join(f[0] for f in FAULTS),
                        help="which fault kernels to run (comma-separated)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, to check this script's plumbing (e.g. --device cpu);"
                             " not a check of anything else")
    args = parser.parse_args()
    args.problems = args.problems.resolve()
    tmp = None
    if args.build_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="kb-gpu-check-")
        args.build_dir = tmp.name
    out_path = args.out or (Path(os.environ["OUT"]) / "gpu_check.json" if os.environ.get("OUT")
                            else None)
    if args.only in ("exploits", "verdicts"):
        check = exploits_check if args.only == "exploits" else verdicts_check
        status = check(args, out_path)
        if tmp is not None:
            tmp.cleanup()
        return status
    cases = [(s, b) for s, b in CASES if args.only in s]
    if args.device == "cpu":
        cases = [(s, b) for s, b in cases if b != "cuda"]  # CUDA kernels need a GPU
    failures: list[str] = []
    records: dict[str, Any] = {"cases": [], "faults": [], "cache": None}
    t0 = time.monotonic()

    # 1. Compile every CUDA kernel ahead, in parallel on the CPU cores (mode "compile"): the
    #    builds land in the cache, keyed by source hash, and the evaluations below only load them.
    builds = [(s, KERNELS / s / f"{k}.py")
              for s, b in cases if b == "cuda" for k in ("right", "wrong")]
    print(f"compiling {len(builds)} CUDA kernels ahead ...", flush=True)
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(builds)))) as executor:
        compiled = list(executor.map(lambda sk: evaluate(args, sk[0], sk[1], "cuda", mode="compile",
                                                     time_limit_s=600), builds))
    compile_times = {}
    for (_, kernel), res in zip(builds, compiled, strict=True):
        compile_times[str(kernel)] = res.get("compile", {}).get("compile_s")
        ok = res["verdict"] == "compiled"
        seconds = res.get("compile", {}).get("compile_s") or 0
        print(f"  {kernel.relative_to(REPO)}: {res['verdict']} compile {seconds:.1f} s "
              f"{short(res) if not ok else ''}", flush=True)
        if not ok:
            failures.append(f"{kernel.relative_to(REPO)} did not compile: {short(res)}")

    # 2. Right kernels, repeated; wrong kernels, once. Each evaluation's processes start while
    #    the previous one runs, as on a runner serving a queue.
    if args.device != "cpu":
        pool.enable()
    rows = []
    env_printed = False
    for slug, backend in cases:
        rights = []
        for i in range(args.repeats):
            res = evaluate(args, slug, KERNELS / slug / "right.py", backend)
            rights.append(res)
            if not env_printed and res.get("environment", {}).get("device_name"):
                e = res["environment"]
                print(f"device {e.get('device_name')} {e.get('arch')} driver {e.get('driver')} "
                      f"torch {e.get('torch')} CUDA {e.get('cuda')} triton {e.get('triton')} "
                      f"python {e.get('python')} sandbox {_sandbox_words(e.get('sandbox'))}",
                      flush=True)
                env_printed = True
            print(f"  {slug} right #{i + 1}: {res['verdict']} "
                  f"cand {fmt_ms(res['candidate'])} ms ref {fmt_ms(res['reference'])} ms "
                  f"compile {res['phases'].get('compile', 0):.2f} s wall {res['wall_s']:.1f} s "
                  f"flags {res.get('flags') or '-'} {short(res)}", flush=True)
            if res["verdict"] != "correct":
                failures.append(f"{slug} right #{i + 1}: {res['verdict']} {short(res)}")
        wrong = evaluate(args, slug, KERNELS / slug / "wrong.py", backend)
        print(f"  {slug} wrong: {wrong['verdict']} {short(wrong)}", flush=True)
        if wrong["verdict"] != "incorrect":
            failures.append(f"{slug} wrong: expected incorrect, got {wrong['verdict']}")
        spreads = {}
        for side in ("candidate", "reference"):
            medians = [r[side]["median_ms"] for r in rights if r.get(side)]
            if len(medians) == len(rights) and medians:
                spreads[side] = max(abs(m - medians[0]) for m in medians) / medians[0]
            else:
                spreads[side] = None
        for side in ("candidate", "reference"):
            if spreads[side] is not None and spreads[side] > MAX_SPREAD:
                failures.append(f"{slug}: {side} median spread {spreads[side]:.1%} > 2%")
        rows.append((slug, backend, rights, wrong, spreads))
        records["cases"].append({"problem": slug, "backend": backend, "right": rights,
                                 "wrong": wrong, "spread": spreads})

    # 3. Faults, each followed by a normal evaluation on the same runner.
    fault_rows = []
    if not args.skip_faults and args.device != "cpu":
        for name, backend, expected, text in [f for f in FAULTS
                                              if f[0] in args.faults.split(",")]:
            limit = 30 if name == "hang" else 300
            res = evaluate(args, FAULT_PROBLEM, KERNELS / "faults" / f"{name}.py", backend,
                           time_limit_s=limit, measure=False)
            after = evaluate(args, FAULT_PROBLEM, KERNELS / FAULT_PROBLEM / "right.py", "cuda",
                             measure=False)
            ok = res["verdict"] == expected and text.lower() in (res.get("error") or "").lower()
            print(f"  fault {name}: {res['verdict']} ({short(res)}) wall {res['wall_s']:.1f} s; "
                  f"next: {after['verdict']}", flush=True)
            if not ok:
                failures.append(f"fault {name}: expected {expected} with '{text}', got "
                                f"{res['verdict']}: {short(res)}")
            if after["verdict"] != "correct":
                failures.append(f"after fault {name}: next evaluation {after['verdict']}")
            fault_rows.append((name, res, after))
            records["faults"].append({"fault": name, "result": res, "next": after})

    # 4. The cache: the first build's compile time against the re-evaluations' (cache hits).
    cache_line = None
    cuda_cases = [r for r in rows if r[1] == "cuda"]
    if cuda_cases:
        slug, _, rights, _, _ = cuda_cases[0]
        kernel = KERNELS / slug / "right.py"
        first = compile_times.get(str(kernel))
        again = [r["compile"].get("compile_s") for r in rights]
        hits = [r["compile"].get("cache_hit") for r in rights]
        spent = ", ".join(f"{c or 0:.2f}" for c in again)
        cache_line = (f"{slug} right.py: compiled in {first or 0:.1f} s; re-evaluations spent "
                      f"{spent} s compiling (cache hits: {hits})")
        records["cache"] = {"kernel": str(kernel.relative_to(REPO)), "first_compile_s": first,
                            "re_evaluation_compile_s": again, "cache_hits": hits}
        if not first or any(c for c in again) or not all(hits):
            failures.append("cache: a re-evaluation compiled again")

    # 5. The table.
    print()
    head = (f"{'problem':44} {'backend':7} {'kernel':6} {'verdict':13} {'cand ms':>9} "
            f"{'ref ms':>9} {'speedup':>8} {f'spread c/r ({args.repeats}x)':>16}")
    print(head)
    print("-" * len(head))
    for slug, backend, rights, wrong, spreads in rows:
        first = rights[0]
        verdicts = {r["verdict"] for r in rights}
        v = verdicts.pop() if len(verdicts) == 1 else "/".join(sorted(verdicts))
        sp = "/".join("-" if spreads[s] is None else f"{spreads[s]:.2%}"
                      for s in ("candidate", "reference"))
        speed = f"{first['speedup']:.3f}" if first.get("speedup") else "-"
        print(f"{slug:44} {backend:7} {'right':6} {v:13} {fmt_ms(first['candidate']):>9} "
              f"{fmt_ms(first['reference']):>9} {speed:>8} {sp:>16}")
        print(f"{'':44} {backend:7} {'wrong':6} {wrong['verdict']:13} "
              f"{'-':>9} {'-':>9} {'-':>8} {'-':>16}")
    for name, res, after in fault_rows:
        print(f"{'fault: ' + name:44} {'':7} {'fault':6} {res['verdict']:13}  {short(res)[:60]}")
        print(f"{'  then the right kernel':44} {'cuda':7} {'right':6} {after['verdict']:13}")
    if cache_line:
        print(f"\ncache: {cache_line}")
    print(f"\ntotal {time.monotonic() - t0:.0f} s")
    if out_path:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(records, indent=1, default=str))
        print(f"results: {out_path}")
    if tmp is not None:
        tmp.cleanup()
    if failures:
        print("\nCHECK FAILED:")
        for f in failures:
            print(f"  - {f}")
        return 1
    print("\nCHECK PASSED")
    return 0


# --- the adversarial suite (issue 9) ---------------------------------------------------------

SUITE = REPO / "tests" / "exploits" / "kernels"
EXPLOITS_DIR = KERNELS / "exploits"
GELU = "level1/88_MinGPTNewGelu"
MATMUL = "level1/1_Square_matrix_multiplication_"
RELU = "level1/19_ReLU"
# 19_ReLU as published holds 6.4 GB a tensor; a quarter of a GiB shows the same things faster.
EXPLOIT_SIZES = {RELU: {"dim": 16384}}
LOOSE = {"atol": 1e-2, "rtol": 1e-2}
EXPLOIT_TIMING = {"warmup": 3, "min_reps": 20, "max_reps": 100, "target_rel_err": 0.01,
                  "max_seconds": 1.0, "sets": 3}


@dataclass(frozen=True)
class Exploit:
    what: str  # the exploit class (or "honest: ...")
    problem: str
    kernel: Path
    backend: str
    verdict: str
    flags: frozenset[str] = frozenset()  # must all be there; honest kernels: no flag at all
    # At least one of these too, where the judge may name the same cheat either way.
    any_of: frozenset[str] = frozenset()
    overrides: tuple[tuple[str, Any], ...] = ()
    gpu_only: bool = True

    @property
    def honest(self) -> bool:
        return self.what.startswith("honest")


def _case(what: str, problem: str, kernel: Path, backend: str, verdict: str,
          flags: tuple[str, ...] = (), gpu_only: bool = True, any_of: tuple[str, ...] = (),
          **overrides: Any) -> Exploit:
    return Exploit(what, problem, kernel, backend, verdict, frozenset(flags), frozenset(any_of),
                   tuple(sorted(overrides.items())), gpu_only)


EXPLOITS = [
    # GPU-only kernels.
    _case("work on another stream", GELU, EXPLOITS_DIR / "side_stream.py", "torch", "correct",
          ("unsynchronized_work",)),
    _case("reuse of freed memory", GELU, EXPLOITS_DIR / "freed_memory.py", "torch",
          "rejected", ("stale_memory_output",), gpu_only=False),
    _case("patching the timer (CUDA events)", GELU, EXPLOITS_DIR / "event_patch.py", "torch",
          "correct", ("monkeypatch", "unsynchronized_work", "faster_than_light")),
    _case("CUDA claimed, PyTorch runs", GELU, EXPLOITS_DIR / "cuda_never_called.py", "cuda",
          "correct", ("backend_not_used",)),
    _case("Triton claimed, PyTorch runs", GELU, EXPLOITS_DIR / "triton_never_called.py",
          "triton", "correct", ("backend_not_used",), gpu_only=False),
    _case("Triton claimed, fails when profiled", RELU, SUITE / "fails_when_profiled.py",
          "triton", "runtime_error", gpu_only=False),
    # Its profiling worker dies on the profiled call: the timed worker makes it instead.
    _case("Triton claimed, kills its profiler", RELU, SUITE / "crashes_profiling_process.py",
          "triton", "correct", ("backend_not_used",), gpu_only=False),
    _case("Triton claimed, stalls its profiler", RELU, SUITE / "hangs_profiling_process.py",
          "triton", "correct", ("backend_not_used",), gpu_only=False, profiler_patience_s=5),
    # The timed worker makes the profiled call here, as without a profiling worker.
    # Its inputs come with the request, so the call is made and the claim judged.
    _case("Triton claimed, profiled call prevented", RELU, SUITE / "unjudged_backend.py",
          "triton", "correct", ("backend_not_used",), gpu_only=False, profile_process=False),
    _case("precision downgrade (TF32)", MATMUL, EXPLOITS_DIR / "tf32_matmul.py", "torch",
          "correct", ("precision_downgrade",), **LOOSE),
    # The CPU suite's kernels, on the GPU.
    _case("input mutation", RELU, SUITE / "mutates_input.py", "torch", "rejected",
          ("input_mutated",), gpu_only=False),
    _case("output aliasing an input", RELU, SUITE / "aliases_input.py", "torch", "rejected",
          ("output_aliases_input",), gpu_only=False),
    # On the CPU the replayed answer is an earlier timed call's (result_caching); on the H200
    # the handed-over inputs came back at one address with new values, so it matched no earlier
    # answer either (timed_output_incorrect). Rejected and named both ways.
    _case("result caching (address)", RELU, SUITE / "cache_by_pointer.py", "torch", "rejected",
          gpu_only=False, any_of=("result_caching", "timed_output_incorrect")),
    # Never hits: every timed call's inputs are new tensors (the judge's draw for that call).
    _case("result caching (object)", RELU, SUITE / "cache_by_id.py", "torch", "correct",
          gpu_only=False),
    _case("batch-and-skip across calls", RELU, SUITE / "batch_and_skip.py", "torch",
          "rejected", ("deferred_output",), gpu_only=False),
    _case("work in a thread outliving the call", RELU, SUITE / "thread_outlives_call.py",
          "torch", "rejected", ("background_thread",), gpu_only=False),
    _case("lazy output (tensor subclass)", RELU, SUITE / "lazy_output.py", "torch", "rejected",
          ("lazy_output",), gpu_only=False),
    _case("branching on checked vs timed", RELU, SUITE / "branch_on_timing.py", "torch",
          "rejected", ("timed_output_incorrect",), gpu_only=False),
    _case("patching the harness", RELU, SUITE / "patches_harness.py", "torch", "correct",
          ("timing_unconfirmed", "monkeypatch"), gpu_only=False),
    # What a kernel reaches inside its own process (tests/exploits/test_judge_owns_timing.py).
    _case("precomputing the timed answers", RELU, SUITE / "precomputes_timed_answers.py",
          "torch", "rejected", gpu_only=False),
    # It answers the first tensor shaped like its input that it finds in the worker: where that
    # is a correctness trial's input, its answer is a trial's, named result_caching.
    _case("reading seeds and future inputs", RELU, SUITE / "reads_seeds_and_future_inputs.py",
          "torch", "rejected", gpu_only=False,
          any_of=("timed_output_incorrect", "result_caching")),
    _case("scaling samples in the channel's send", RELU, SUITE / "patches_channel_send.py",
          "torch", "correct", ("timing_unconfirmed",), gpu_only=False),
    _case("a worker timer reporting half", RELU, SUITE / "halves_its_samples.py", "torch",
          "correct", ("timing_unconfirmed",), gpu_only=False),
    _case("forged backend evidence (C++)", RELU, SUITE / "forged_backend_evidence.py", "cpp",
          "correct", ("backend_not_used",), gpu_only=False),
    _case("inf in the output", RELU, SUITE / "inf_output.py", "torch", "incorrect",
          gpu_only=False),
    # Honest kernels: correct, no flag (no speed-of-light flag on an algebraic shortcut, no
    # precision flag on an fp32 kernel under a loose tolerance, no backend flag on cuBLAS plus
    # a small CUDA epilogue).
    _case("honest: Triton GELU", GELU, KERNELS / GELU / "right.py", "triton", "correct",
          gpu_only=False),
    _case("honest: CUDA diag(A) @ B as a row scale", "level1/12_Matmul_with_diagonal_matrices_",
          KERNELS / "level1/12_Matmul_with_diagonal_matrices_/right.py", "cuda", "correct"),
    _case("honest: Triton fp32 matmul, loose tolerance", MATMUL, KERNELS / MATMUL / "right.py",
          "triton", "correct", **LOOSE),
    _case("honest: cuBLAS GEMM + CUDA epilogue", "level2/76_Gemm_Add_ReLU",
          KERNELS / "level2/76_Gemm_Add_ReLU/right.py", "cuda", "correct"),
    _case("honest: PyTorch ReLU", RELU, SUITE / "honest_relu.py", "torch", "correct",
          gpu_only=False),
]


def peaks_for(device: str) -> dict[str, Any]:
    """The hardware's peak bandwidth and rates, as the runner passes them in the job."""
    if device == "cpu":
        return {}
    import torch

    try:
        from gpu_runner.detect import KNOWN_DEVICES
    except Exception:  # the device host may not carry the runner's dependencies
        return {}
    name = torch.cuda.get_device_name(torch.device(device))
    for key, peaks in KNOWN_DEVICES.items():
        if key.lower() in name.lower():
            return {"peak_bandwidth_gbs": peaks.get("bandwidth_gbs"),
                    "peak_tflops": peaks.get("tflops", {})}
    return {}


def evaluate_exploit(args: argparse.Namespace, case: Exploit | VerdictCase,
                     peaks: dict[str, Any], **extra: Any) -> dict:
    job = {
        "mode": "evaluate",
        "reference_source": load_problem(args.problems, case.problem, args.smoke,
                                         EXPLOIT_SIZES.get(case.problem)),
        "candidate_source": case.kernel.read_text(),
        "backend": case.backend,
        "precision": "fp32",
        "device": args.device,
        "seed": int.from_bytes(os.urandom(6), "little"),
        "n_trials": 3,
        "timing": dict(EXPLOIT_TIMING),
        "build_dir": args.build_dir,
        "time_limit_s": 300,
        **peaks,
    }
    job.update(dict(case.overrides))
    job.update(extra)
    started = time.monotonic()
    result = run_job(job)
    result["wall_s"] = time.monotonic() - started
    return result


def same_process_freed_memory(args: argparse.Namespace) -> str:
    """What the freed-memory kernel does to an evaluator that runs the reference in its own
    process first (for the table only: ours never does)."""
    if args.device == "cpu":
        return "skipped on the CPU"
    import importlib.util

    import torch

    namespace: dict[str, Any] = {}
    exec(compile(load_problem(args.problems, GELU, args.smoke), "<reference>", "exec"),
         namespace)
    spec = importlib.util.spec_from_file_location("kb_freed", EXPLOITS_DIR / "freed_memory.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with torch.no_grad(), torch.device(args.device):
        x = namespace["get_inputs"]()[0]
        out = namespace["Model"]()(x)
        expected = out.clone()
        del out
        torch.cuda.synchronize()
        got = module.ModelNew()(x)
        fooled = bool(torch.allclose(got, expected))
    del x, expected, got
    torch.cuda.empty_cache()
    return f"in one process, the kernel's output {'IS' if fooled else 'is not'} the " \
           "reference's freed output"


def exploits_check(args: argparse.Namespace, out_path: Path | None) -> int:
    cases = [c for c in EXPLOITS if args.device != "cpu" or not c.gpu_only]
    peaks = peaks_for(args.device)
    print(f"adversarial suite: {len(cases)} kernels on {args.device}; peaks {peaks or 'none'}",
          flush=True)
    builds = [c for c in cases if c.backend == "cuda"]
    with ThreadPoolExecutor(max_workers=max(1, min(4, len(builds)))) as executor:
        compiled = list(executor.map(lambda c: evaluate_exploit(args, c, peaks, mode="compile",
                                                                time_limit_s=600), builds))
    for case, res in zip(builds, compiled, strict=True):
        print(f"  compiled {case.kernel.relative_to(REPO)}: {res['verdict']} {short(res)}",
              flush=True)
    if args.device != "cpu":
        pool.enable()
    rows, failures, records = [], [], []
    for case in cases:
        res = evaluate_exploit(args, case, peaks)
        flags = set(res.get("flags") or [])
        if case.honest:
            ok = res["verdict"] == "correct" and not flags
        else:
            ok = (res["verdict"] == case.verdict and case.flags <= flags
                  and (not case.any_of or bool(case.any_of & flags)))
        if not ok:
            failures.append(f"{case.what}: expected {case.verdict} {sorted(case.flags)}"
                            f"{f' and one of {sorted(case.any_of)}' if case.any_of else ''}, got "
                            f"{res['verdict']} {sorted(flags)} {short(res)}")
        checks = res.get("checks") or {}
        print(f"  {case.what}: {res['verdict']} {sorted(flags) or '-'} "
              f"({'ok' if ok else 'UNEXPECTED'}, {res['wall_s']:.1f} s) {short(res)[:80]}",
              flush=True)
        rows.append((case, res, ok))
        records.append({"class": case.what, "kernel": str(case.kernel.relative_to(REPO)),
                        "problem": case.problem, "backend": case.backend,
                        "expected": {"verdict": case.verdict, "flags": sorted(case.flags),
                                     "any_of": sorted(case.any_of)},
                        "verdict": res["verdict"], "flags": sorted(flags), "ok": ok,
                        "error": res.get("error"), "checks": checks,
                        "candidate": res.get("candidate"), "reference": res.get("reference"),
                        "static_risk": (res.get("static_report") or {}).get("risk"),
                        "judge_clock": (res.get("timing_detail") or {}).get("judge_clock")})
    note = same_process_freed_memory(args)
    print()
    head = f"{'exploit class':42} {'kernel':40} {'verdict':10} {'flags':44} ok"
    print(head)
    print("-" * len(head))
    for case, res, ok in rows:
        kernel = str(case.kernel.relative_to(REPO)).replace("gpu_kernels/", "").replace(
            "tests/exploits/kernels/", "suite/")
        flags = ",".join(sorted(res.get("flags") or [])) or "-"
        print(f"{case.what[:42]:42} {kernel[:40]:40} {res['verdict']:10} {flags[:44]:44} "
              f"{'yes' if ok else 'NO'}")
    print(f"\nfreed memory: {note}")
    if out_path:
        path = out_path.with_name("gpu_exploits.json") if out_path.name == "gpu_check.json" \
            else out_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"cases": records, "freed_memory_same_process": note},
                                   indent=1, default=str))
        print(f"results: {path}")
    if failures:
        print("\nEXPLOIT CHECK FAILED:")
        for f in failures:
            print(f"  - {f}")
        return 1
    print("\nEXPLOIT CHECK PASSED")
    return 0


# --- the verdicts of honest and borderline kernels (issue 21) ---------------------------------

VERDICTS_DIR = KERNELS / "verdicts"
NEVER_CALLED = EXPLOITS_DIR / "triton_never_called.py"
# A copy wrapper that is not capped by the backend_share_small note ranks at its measured
# speedup, which the copy makes slower than the reference; this much above 1 is timing noise.
COPY_NOISE = 0.01

# What each kind of case must get (checked by verdict_problems()).
EXPECTED = {
    "epilogue": "correct, ranks, own share shown",
    "copy": "correct, ranks <= reference",
    "tf32": "incorrect + TF32 hint",
    "ieee": "correct, ranks",
    "not_used": "backend_not_used exploit",
}


@dataclass(frozen=True)
class VerdictCase:
    kind: str  # a key of EXPECTED
    problem: str
    kernel: Path
    backend: str = "triton"
    gpu_only: bool = False
    overrides: tuple[tuple[str, Any], ...] = ()


VERDICT_CASES = [
    VerdictCase("epilogue", "level2/76_Gemm_Add_ReLU",
                VERDICTS_DIR / "epilogue_gemm_add_relu.py"),
    VerdictCase("epilogue", "level2/86_Matmul_Divide_GELU",
                VERDICTS_DIR / "epilogue_matmul_divide_gelu.py"),
    VerdictCase("epilogue", "level2/99_Matmul_GELU_Softmax",
                VERDICTS_DIR / "epilogue_matmul_gelu_softmax.py"),
    VerdictCase("copy", "level2/76_Gemm_Add_ReLU", VERDICTS_DIR / "copy_gemm_add_relu.py"),
    VerdictCase("copy", "level2/18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp",
                VERDICTS_DIR / "copy_matmul_sum_lse.py"),
    # Triton's interpreter has no TF32: on the CPU the default-precision kernel is exact.
    VerdictCase("tf32", MATMUL, VERDICTS_DIR / "matmul_tf32.py", gpu_only=True),
    VerdictCase("ieee", MATMUL, VERDICTS_DIR / "matmul_ieee.py"),
    VerdictCase("not_used", GELU, NEVER_CALLED),
]


def _scoring_row(res: dict) -> dict[str, Any]:
    """The result as evaluation/scoring.py reads an evaluation (no stored baselines)."""
    cand, ref = res.get("candidate") or {}, res.get("reference") or {}
    return {"verdict": res.get("verdict"), "correct": bool(res.get("correct")),
            "flags": list(res.get("flags") or []), "trials": res.get("trials") or [],
            "candidate_median_ms": cand.get("median_ms"),
            "reference_median_ms": ref.get("median_ms"), "speedup": res.get("speedup"),
            "speedup_eager": None, "speedup_compile": None}


def tf32_hint(res: dict) -> tuple[bool, str | None, str | None]:
    """(the TF32 hint is in a failed trial's diagnosis, that hint, how it matched)."""
    for trial in res.get("trials") or []:
        diagnosis = trial.get("diagnosis") if isinstance(trial, dict) else None
        if isinstance(diagnosis, dict) and diagnosis.get("hint"):
            hint = str(diagnosis["hint"])
            return ("TF32" in hint and 'input_precision="ieee"' in hint, hint,
                    diagnosis.get("precision_match_by"))
    return False, None, None


def verdict_problems(case: VerdictCase, res: dict) -> list[str]:
    """What differs from the case's expectation (empty: as expected)."""
    from evaluation import scoring

    row = _scoring_row(res)
    verdict, flags = res.get("verdict"), row["flags"]
    exploit_flags = scoring.exploits(row)
    backend = (res.get("checks") or {}).get("backend") or {}
    out: list[str] = []
    if case.kind in ("epilogue", "copy", "ieee"):
        if verdict != "correct":
            out.append(f"verdict {verdict}, expected correct")
        if exploit_flags:
            out.append(f"exploit flags {exploit_flags}")
        if not scoring.ranks(row):
            out.append("does not rank")
    if case.kind in ("epilogue", "copy") and (backend.get("not_used")
                                              or not backend.get("own_calls")):
        out.append("its own kernels did not run (per the profile)")
    if case.kind == "epilogue" and backend.get("share") is None:
        out.append("no own-kernel share measured")
    if case.kind == "copy" and scoring.ranks(row):
        ranked = scoring.standing(row)["speedup"]
        limit = 1.0 if scoring.capped(row) else 1.0 + COPY_NOISE
        if ranked is None or ranked > limit:
            out.append(f"ranks at speedup {ranked}, above the reference (limit {limit})")
    if case.kind == "tf32":
        if verdict != "incorrect":
            out.append(f"verdict {verdict}, expected incorrect")
        if not tf32_hint(res)[0]:
            out.append(f"no TF32 hint (hint: {tf32_hint(res)[1]})")
    if case.kind == "not_used":
        if "backend_not_used" not in flags:
            out.append(f"no backend_not_used flag (verdict {verdict}, flags {flags})")
        if scoring.ranks(row):
            out.append("ranks")
    return out


def _share_words(res: dict) -> str:
    backend = (res.get("checks") or {}).get("backend") or {}
    if backend.get("share") is None:
        return "-"
    share = float(backend["share"])
    basis = "dev" if backend.get("basis") == "device time" else "host"
    return f"{share:.2%} {basis}" if share >= 0.0001 or share == 0 else f"{share:.1e} {basis}"


def verdicts_check(args: argparse.Namespace, out_path: Path | None) -> int:
    from evaluation import scoring
    from evaluator import flags as flag_kinds

    if args.device != "cpu":
        import torch

        if not torch.cuda.is_available():
            print("verdicts: needs CUDA (no GPU here); `--device cpu --smoke` runs the cases "
                  "that need none through Triton's interpreter")
            return 2
    cases = [c for c in VERDICT_CASES if args.device != "cpu" or not c.gpu_only]
    skipped = [c for c in VERDICT_CASES if c not in cases]
    peaks = peaks_for(args.device)
    print(f"verdicts: {len(cases)} kernels on {args.device}"
          f"{f' ({len(skipped)} need CUDA, skipped)' if skipped else ''}; "
          f"peaks {peaks or 'none'}", flush=True)
    if args.device != "cpu":
        pool.enable()
    rows, failures, records = [], [], []
    for case in cases:
        res = evaluate_exploit(args, case, peaks)
        problems = verdict_problems(case, res)
        flags = list(res.get("flags") or [])
        row = _scoring_row(res)
        ranked = scoring.standing(row)["speedup"] if scoring.ranks(row) else None
        hint_ok, hint, matched_by = tf32_hint(res)
        backend = (res.get("checks") or {}).get("backend") or {}
        kernel = str(case.kernel.relative_to(REPO))
        for p in problems:
            failures.append(f"{kernel} ({case.problem}): {p}")
        print(f"  {kernel}: {res['verdict']} flags {flag_kinds.exploits(flags) or '-'} notes "
              f"{flag_kinds.notes(flags) or '-'} share {_share_words(res)} speedup "
              f"{res.get('speedup')} ({'ok' if not problems else 'UNEXPECTED'}, "
              f"{res['wall_s']:.1f} s) {short(res)[:80]}", flush=True)
        if hint:
            print(f"    hint ({matched_by}): {hint[:160]}", flush=True)
        rows.append((case, res, ranked, hint_ok, problems))
        records.append({
            "kind": case.kind, "kernel": kernel, "problem": case.problem,
            "backend": case.backend, "expected": EXPECTED[case.kind],
            "verdict": res["verdict"], "flags": flag_kinds.exploits(flags),
            "notes": flag_kinds.described_notes(flags, res.get("checks")),
            "share": backend.get("share"), "share_basis": backend.get("basis"),
            "share_text": flag_kinds.backend_share_text(backend),
            "own_calls": backend.get("own_calls"), "top_kernels": backend.get("top_kernels"),
            "speedup": res.get("speedup"), "ranked_speedup": ranked,
            "ranks": scoring.ranks(row), "capped": scoring.capped(row),
            "tf32_hint": hint_ok, "hint": hint, "hint_matched_by": matched_by,
            "candidate": res.get("candidate"), "reference": res.get("reference"),
            "error": res.get("error"), "trials": res.get("trials"),
            "ok": not problems, "problems": problems,
        })
    print()
    head = (f"{'kernel':30} {'problem':30} {'expected':32} {'verdict':10} {'flags':17} "
            f"{'notes':19} {'share':>12} {'speedup':>8} {'ranked':>7} {'TF32':5} ok")
    print(head)
    print("-" * len(head))
    for case, res, ranked, hint_ok, problems in rows:
        flags = list(res.get("flags") or [])
        kernel = case.kernel.stem if case.kernel.parent == VERDICTS_DIR else \
            str(case.kernel.relative_to(KERNELS))
        speed = f"{res['speedup']:.3f}" if res.get("speedup") else "-"
        rank = f"{ranked:.3f}" if ranked is not None else "-"
        tf32 = ("yes" if hint_ok else "no") if case.kind in ("tf32", "ieee") else "-"
        print(f"{kernel[:30]:30} {case.problem.split('/')[-1][:30]:30} "
              f"{EXPECTED[case.kind]:32} {res['verdict'][:10]:10} "
              f"{(','.join(flag_kinds.exploits(flags)) or '-')[:17]:17} "
              f"{(','.join(flag_kinds.notes(flags)) or '-')[:19]:19} {_share_words(res):>12} "
              f"{speed:>8} {rank:>7} {tf32:5} {'yes' if not problems else 'NO'}")
    for case in skipped:
        print(f"{case.kernel.stem[:30]:30} {case.problem.split('/')[-1][:30]:30} "
              f"{EXPECTED[case.kind]:32} skipped: needs CUDA")
    if out_path:
        path = out_path.with_name("gpu_verdicts.json") if out_path.name == "gpu_check.json" \
            else out_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"cases": records, "copy_noise": COPY_NOISE,
                                    "skipped": [str(c.kernel.relative_to(REPO))
                                                for c in skipped]},
                                   indent=1, default=str))
        print(f"results: {path}")
    if failures:
        print("\nVERDICT CHECK FAILED:")
        for f in failures:
            print(f"  - {f}")
        return 1
    print("\nVERDICT CHECK PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
