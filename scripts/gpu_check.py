#!/usr/bin/env python3
"""GPU check of the evaluator (issue 3), in one command on an H200. No Django.

    python3 scripts/gpu_check.py --problems gpu_kernels/problems

For six KernelBench level 1 and 2 problems it evaluates our own right kernel (5 times: the
spread of the median across fresh evaluations) and a subtly wrong one (gpu_kernels/<slug>/);
then a segfaulting, a hanging, an illegal-memory-access and an out-of-memory kernel, each
followed by a normal evaluation on the same runner; and shows that re-evaluating a compiled
CUDA kernel spends no time compiling. Prints a table, writes every result as JSON (--out, or
$OUT/gpu_check.json when $OUT is set), and exits 0 only when every expectation holds.
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
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluation.harness.sandbox import run_job  # noqa: E402

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


def load_problem(problems: Path, slug: str, smoke: bool = False) -> str:
    path = problems / f"{slug}.py"
    if not path.exists():
        sys.exit(f"problem file missing: {path} (pass the folder with --problems)")
    source = path.read_text()
    if smoke:
        for name, value in SMOKE_SIZES.items():
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--problems", type=Path, default=REPO.parent / "shared" / "kernelbench",
                        help="folder with level1/, level2/ KernelBench files")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--build-dir", default=None, help="extension cache (default: a temp dir)")
    parser.add_argument("--only", default="", help="run only problems whose slug contains this")
    parser.add_argument("--skip-faults", action="store_true")
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
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(builds)))) as pool:
        compiled = list(pool.map(lambda sk: evaluate(args, sk[0], sk[1], "cuda", mode="compile",
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

    # 2. Right kernels, repeated; wrong kernels, once.
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
                      f"python {e.get('python')} sandbox {e.get('sandbox', {}).get('isolation')}",
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
        if spreads["candidate"] is not None and spreads["candidate"] > MAX_SPREAD:
            failures.append(f"{slug}: candidate median spread {spreads['candidate']:.1%} > 2%")
        rows.append((slug, backend, rights, wrong, spreads))
        records["cases"].append({"problem": slug, "backend": backend, "right": rights,
                                 "wrong": wrong, "spread": spreads})

    # 3. Faults, each followed by a normal evaluation on the same runner.
    fault_rows = []
    if not args.skip_faults and args.device != "cpu":
        for name, backend, expected, text in FAULTS:
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


if __name__ == "__main__":
    sys.exit(main())
