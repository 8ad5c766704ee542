"""Where an evaluation's time goes: a fixed set of kernels through the real runner, phase by phase.

    python3 bench/eval_speed.py --kernelbench .kernelbench      # on a GPU host (an H200)
    python3 bench/eval_speed.py --cpu                          # the sample problems on the CPU
    python3 bench/eval_speed.py --cpu --before                 # the slow path, for comparison

On the H200, from the repository root (Django from the carried wheels, as scripts/gpu_check.sh):

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site && \
    python3 bench/eval_speed.py --kernelbench .kernelbench --json $OUT/after.json && \
    python3 bench/eval_speed.py --kernelbench .kernelbench --before --only 19_ReLU \
        --repeats 1 --json $OUT/before.json

Every CUDA kernel of the set is compiled ahead first, in parallel on the CPU cores, into the
runner's build cache (as a runner compiling ahead of the GPU would), so the evaluations measure
already compiled kernels; --no-precompile leaves the compiling to the first evaluations.

It sets up a throwaway SQLite site, imports the problems, starts one real `manage.py runner`, and
submits the kernels one at a time through `submission_create` (each waits for the previous one
to be stored, so every evaluation is measured alone). For each evaluation it prints the time in
each phase:

  queue     submitted -> claimed by the runner (started_at - created_at)
  pre       whether the evaluation got processes started ahead (a spare)
  start     handing over the job -> the judge starts compiling: interpreters, imports, CUDA,
            worker ready, reference loaded (most of it paid ahead when pre-started)
  load      building the candidate: compile, or loading it from the build cache
  inputs    input generation (every trial and timing set, from the server's seeds)
  check     the correctness trials (transfers, candidate, reference, comparison)
  timing    the timed loops of candidate and reference
  post      after the timing: the profiled call (does the claimed backend do the work?), the
            final state, the speed-of-light bound, and anything the phases above leave out
  store     end of the harness -> result stored and published (finished_at - claim - harness)
  e2e       submitted -> stored

then the GPU-time floor (the timed calls of kernel and reference alone: the sum of their timed
durations), the ratio of end-to-end time to that floor, and evaluations per hour for the set.
`--before` runs the runner on the slow path kept for comparison (no pre-started processes,
tensors through host memory), so one script gives both tables.
"""

import argparse
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

RELU_REPEATS = 5  # already compiled 19_ReLU evaluations: the issue's latency target


# (label, problem file under the problems folder, kernel file in the repo or "=reference")
def gpu_set(repeats: int) -> list[tuple[str, str, str]]:
    relu = ("level1/19_ReLU.py", "bench/kernels/level1_19_ReLU_cuda.py")
    return [
        ("19_ReLU first", *relu),
        *[(f"19_ReLU #{i}", *relu) for i in range(1, repeats + 1)],
        *[
            (name.split("_", 1)[0] + f" L{level}", f"level{level}/{name}.py",
             f"gpu_kernels/level{level}/{name}/right.py")
            for level, name in [
                (1, "1_Square_matrix_multiplication_"),
                (1, "12_Matmul_with_diagonal_matrices_"),
                (1, "88_MinGPTNewGelu"),
                (2, "12_Gemm_Multiply_LeakyReLU"),
                (2, "76_Gemm_Add_ReLU"),
                (2, "86_Matmul_Divide_GELU"),
            ]
        ],
    ]


def cpu_set(repeats: int) -> list[tuple[str, str, str]]:
    relu = ("level1/901_Small_ReLU.py", "tests/kernels/relu_correct.py")
    return [
        ("901_ReLU first", *relu),
        *[(f"901_ReLU #{i}", *relu) for i in range(1, repeats + 1)],
        # The other samples, each against its own reference renamed ModelNew (a correct kernel).
        ("902_Matmul", "level1/902_Small_Matmul.py", "=reference"),
        ("903_Softmax", "level1/903_Small_Softmax.py", "=reference"),
        ("904_Add", "level1/904_Small_Add.py", "=reference"),
        ("L2 901_Linear_GELU", "level2/901_Small_Linear_GELU.py", "=reference"),
    ]


# What --before turns off in the runner's environment (read by evaluator).
SLOW_PATH_ENV = {"KB_HARNESS_PRESTART": "0", "KB_HARNESS_CUDA_IPC": "0"}
FAST_PATH_ENV = {"KB_HARNESS_PRESTART": "1"}
NO_SANDBOX_ENV = {"KB_SANDBOX": "off", "KB_SANDBOX_OFF_I_UNDERSTAND": "1"}


def guess_backend(source: str) -> str:
    if "load_inline" in source and "cuda_sources" in source:
        return "cuda"
    if "@triton.jit" in source:
        return "triton"
    return "torch"


def fmt(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def floor_seconds(evaluation) -> float | None:
    """The timed calls alone: mean x n for candidate and reference (the sum of their samples)."""
    total = 0.0
    for stats in (evaluation.candidate_stats, evaluation.reference_stats):
        if not stats or stats.get("mean_ms") is None or not stats.get("n"):
            return None
        total += stats["mean_ms"] * stats["n"] / 1e3
    return total


def row_for(label: str, submission, evaluation) -> dict:
    phases = evaluation.phases or {}
    created, started, finished = (
        submission.created_at, submission.started_at, submission.finished_at
    )
    harness = phases.get("wall") or phases.get("total")
    e2e = (finished - created).total_seconds() if finished else None
    queue = (started - created).total_seconds() if started else None
    store = None
    if finished and started and harness is not None:
        store = (finished - started).total_seconds() - harness
    # Up to the judge's "compiling": interpreters, imports, CUDA, worker ready, reference loaded.
    start = phases.get("startup")
    if start is None:
        start = (phases.get("process_start") or 0.0) + (phases.get("worker_start") or 0.0)
    environment = evaluation.environment or {}
    floor = floor_seconds(evaluation)
    return {
        "label": label,
        "verdict": evaluation.verdict,
        "queue": queue,
        "start": start,
        "load": phases.get("load"),
        "compile": phases.get("compile"),
        "inputs": phases.get("inputs"),
        "check": phases.get("correctness"),
        "timing": phases.get("timing"),
        # After the timing (the profiled call, the final state, speed of light) and whatever
        # the phases above leave out.
        "post": (harness - sum(phases.get(k) or 0.0 for k in
                               ("load", "inputs", "correctness", "timing")) - (start or 0.0))
        if harness is not None else None,
        "profile": phases.get("profile"),
        "phases": phases,
        "harness": harness,
        "store": store,
        "e2e": e2e,
        "floor": floor,
        "ratio": (e2e / floor) if (e2e and floor) else None,
        "cand_ms": evaluation.candidate_median_ms,
        "ref_ms": evaluation.reference_median_ms,
        "speedup": evaluation.speedup,
        "trials": len(evaluation.trials or []),
        "n_timed": [(s or {}).get("n") for s in (evaluation.candidate_stats,
                                                 evaluation.reference_stats)],
        "prestarted": bool((environment.get("sandbox") or {}).get("prestarted")),
        "transfer": environment.get("transfer"),
        "memory_gb": ((evaluation.static_report or {}).get("checks") or {}).get("memory_gb"),
        "error": (evaluation.error or "")[:200],
    }


def print_table(rows: list[dict], title: str) -> None:
    print(f"\n{title}")
    head = (f"{'evaluation':22} {'verdict':9} {'pre':3} {'queue':>6} {'start':>6} {'load':>6} "
            f"{'inputs':>6} {'check':>6} {'timing':>6} {'post':>6} {'store':>6} {'e2e s':>7} "
            f"{'floor s':>8} {'e2e/floor':>9} {'cand ms':>9} {'speedup':>8}")
    print(head)
    print("-" * len(head))
    for r in rows:
        pre = "yes" if r["prestarted"] else "no"
        print(f"{r['label'][:22]:22} {r['verdict'][:9]:9} {pre:3} {fmt(r['queue']):>6} "
              f"{fmt(r['start']):>6} {fmt(r['load']):>6} {fmt(r['inputs']):>6} "
              f"{fmt(r['check']):>6} {fmt(r['timing']):>6} {fmt(r['post']):>6} "
              f"{fmt(r['store']):>6} "
              f"{fmt(r['e2e']):>7} {fmt(r['floor'], '.3f'):>8} {fmt(r['ratio'], '.0f'):>9} "
              f"{fmt(r['cand_ms'], '.4g'):>9} {fmt(r['speedup'], '.3g'):>8}")
        if r["verdict"] != "correct" and r["error"]:
            print(f"{'':22} {r['error']}")
    moved = [r["transfer"] for r in rows if r.get("transfer")]
    if moved:
        ipc = sum(t.get("ipc_bytes", 0) for t in moved)
        host = sum(t.get("host_bytes", 0) for t in moved)
        errors = {t["ipc_error"] for t in moved if t.get("ipc_error")}
        print(f"tensors moved between judge and worker: {ipc / 1e9:.2f} GB through GPU memory "
              f"(CUDA IPC), {host / 1e9:.2f} GB through host memory"
              + (f"; CUDA IPC off: {sorted(errors)}" if errors else ""))


def summarize(rows: list[dict], repeat_prefix: str, wall: float) -> dict:
    done = [r for r in rows if r["e2e"] is not None]
    # The latency target counts correct evaluations only (a failed one ends early).
    repeats = [r for r in done if r["label"].startswith(repeat_prefix) and "#" in r["label"]
               and r["verdict"] == "correct"]
    medians = [r["cand_ms"] for r in repeats if r["cand_ms"]]
    spread = (max(medians) - min(medians)) / medians[0] if len(medians) > 1 else None
    floors = [r["floor"] for r in done if r["floor"]]
    e2e = [r["e2e"] for r in done]
    return {
        "evaluations": len(done),
        "wall_s": wall,
        "sum_e2e_s": sum(e2e),
        "sum_floor_s": sum(floors),
        "ratio_to_floor": sum(e2e) / sum(floors) if floors else None,
        "evaluations_per_hour": 3600 * len(done) / sum(e2e) if e2e else None,
        "repeat_e2e_median_s": statistics.median([r["e2e"] for r in repeats]) if repeats else None,
        "repeat_candidate_median_spread": spread,
        "repeat_trials_min": min((r["trials"] for r in repeats), default=None),
        "repeats_correct": len(repeats),
    }


def precompile(items: list, *, hardware_is_cpu: bool, owner: str) -> None:
    """Build every kernel of the set ahead, in parallel on the CPU cores, into the runner's build
    cache (a `mode: "compile"` job each, under the submitter's cache entries: `owner` is its
    `Submission.participant`): the evaluations then measure already compiled kernels, as a
    runner that compiles ahead of the GPU would see them."""
    from concurrent.futures import ThreadPoolExecutor

    from django.conf import settings

    from evaluator.runner import pool, sandbox

    pool.enable(False)  # no spares in this process: the runner keeps its own
    jobs = {}
    for _, problem, source in items:
        backend = guess_backend(source)
        if backend not in ("cuda", "cpp") or source in jobs:
            continue  # Triton compiles at its first call; plain torch has nothing to build
        jobs[source] = {
            "mode": "compile", "reference_source": problem.current_version.source,
            "candidate_source": source, "backend": backend,
            "device": "cpu" if hardware_is_cpu else "cuda",
            "build_dir": str(settings.BUILD_CACHE_DIR), "build_owner": owner,
            "time_limit_s": 600,
        }
    if not jobs:
        return
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=4) as threads:
        results = list(threads.map(sandbox.run_job, jobs.values()))
    built = sum(r.get("verdict") == "compiled" for r in results)
    print(f"compiled ahead: {built}/{len(jobs)} kernels in {time.monotonic() - started:.1f} s "
          f"(in parallel on the CPU cores)")
    for r in results:
        if r.get("verdict") != "compiled":
            print(f"  not compiled: {r.get('verdict')}: {(r.get('error') or '')[:300]}")


def wait_until(predicate, timeout: float, runner: subprocess.Popen, log_path: Path) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        if runner.poll() is not None:
            print(f"the runner exited with status {runner.returncode}:")
            print(log_path.read_text()[-3000:])
            return False
        time.sleep(0.05)
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", default=str(REPO / ".kernelbench"),
                        help="KernelBench problem folder (GPU set)")
    parser.add_argument("--cpu", action="store_true", help="the sample problems on the CPU")
    parser.add_argument("--before", action="store_true",
                        help="run the slow path (no pre-start, host-memory transfers)")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="candidate code without its bubblewrap sandbox (KB_SANDBOX=off), "
                             "to measure the sandbox's own cost; only on a machine that runs "
                             "nothing else")
    parser.add_argument("--only", default="", help="run only the labels that start with this")
    parser.add_argument("--repeats", type=int, default=RELU_REPEATS,
                        help="evaluations of the already compiled ReLU after the first")
    parser.add_argument("--no-precompile", action="store_true",
                        help="let the first evaluation of each kernel compile it")
    parser.add_argument("--time-limit", default="300")
    parser.add_argument("--timeout", type=float, default=600, help="per evaluation, seconds")
    parser.add_argument("--json", default="", help="also write the rows to this file")
    args = parser.parse_args()

    var = Path(tempfile.mkdtemp(prefix="kbsite-eval-speed-"))
    # One build cache for every run on this machine: a later run (--before) finds the kernels
    # compiled by an earlier one.
    os.environ.setdefault("BUILD_CACHE_DIR",
                          str(Path(tempfile.gettempdir()) / "kbsite-eval-speed-build"))
    # A throwaway site: its own secret key (DEBUG is off unless asked for).
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "kbsite.settings",
        "KBSITE_VAR_DIR": str(var),
        "EVALUATION_TIME_LIMIT": args.time_limit,
        "RUNNER_HEARTBEAT_SECONDS": "2",
        "LOG_LEVEL": "WARNING",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        # Each submission's own evaluation is measured; a new record's second evaluation (on
        # another runner, after a grace period) would only hold the queue here.
        "REVERIFY_NEW_RECORDS": "0",
        **(SLOW_PATH_ENV if args.before else FAST_PATH_ENV),
        **(NO_SANDBOX_ENV if args.no_sandbox else {}),
    })
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from evaluation.services import hardware_register
    from gpu_runner.detect import detect
    from problems.services import SAMPLES_DIR
    from scripts.runner_check import import_problem
    from submissions.models import Evaluation, Submission
    from submissions.services import submission_create

    detected = detect("cpu" if args.cpu else None)
    slug = detected.pop("slug")
    hardware = hardware_register(slug=slug, **detected)
    # Staff: no submission quota gets in the way of the set.
    user = get_user_model().objects.create_user("bench", is_staff=True)
    problems_root = SAMPLES_DIR if args.cpu else Path(args.kernelbench)
    full = (cpu_set if args.cpu else gpu_set)(args.repeats)
    plan = [p for p in full if p[0].startswith(args.only)]

    problems = {}
    items = []
    for label, problem_file, kernel_file in plan:
        problem_path = problems_root / problem_file
        if not problem_path.exists() or (
            kernel_file != "=reference" and not (REPO / kernel_file).exists()
        ):
            print(f"skipped (missing): {label}: {problem_file} / {kernel_file}")
            continue
        reference = problem_path.read_text()
        if problem_file not in problems:
            problems[problem_file] = import_problem(problems_root, problem_file)
        if kernel_file == "=reference":
            source = reference.replace("class Model(", "class ModelNew(")
        else:
            source = (REPO / kernel_file).read_text()
        items.append((label, problems[problem_file], source))

    if not args.no_precompile:
        precompile(items, hardware_is_cpu=args.cpu, owner=f"user:{user.pk}")

    log_path = var / "runner.log"
    log = open(log_path, "w")  # noqa: SIM115 (open while the runner runs)
    runner = subprocess.Popen(
        [sys.executable, "manage.py", "runner", "--hardware", slug]
        + ([] if args.cpu else ["--devices", "0"]),
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
    )
    rows: list[dict] = []
    started = time.monotonic()

    def stop(signum, frame):
        raise KeyboardInterrupt

    # Stopped by a time limit (timeout sends SIGTERM), it still prints the rows it has.
    signal.signal(signal.SIGTERM, stop)
    try:
        for label, problem, source in items:
            submission = submission_create(
                user=user, problem=problem, source=source, backend=guess_backend(source),
                hardware=hardware,
            )
            finished = wait_until(
                lambda s=submission: Submission.objects.filter(
                    pk=s.pk, status="finished").exists(),
                args.timeout, runner, log_path,
            )
            submission.refresh_from_db()
            evaluation = Evaluation.objects.filter(submission=submission).first()
            if not finished or evaluation is None:
                print(f"{label}: not finished ({submission.status})")
                break
            rows.append(row_for(label, submission, evaluation))
            r = rows[-1]
            print(f"  {label}: {r['verdict']} in {fmt(r['e2e'])} s", flush=True)
    except KeyboardInterrupt:
        print(f"stopped after {len(rows)} of {len(items)} evaluations")
    finally:
        wall = time.monotonic() - started
        if runner.poll() is None:
            runner.terminate()
            try:
                runner.wait(timeout=60)
            except subprocess.TimeoutExpired:
                runner.kill()

    path = "slow path (--before)" if args.before else "fast path"
    path += ", no sandbox (--no-sandbox)" if args.no_sandbox else ", sandboxed (bubblewrap)"
    print(f"\nhardware {hardware.slug}: {hardware.name}, torch {hardware.torch_version}, "
          f"CUDA {hardware.cuda_version or '-'}; {path}")
    print_table(rows, "seconds per phase of each evaluation (submitted one at a time)")
    summary = summarize(rows, "19_ReLU" if not args.cpu else "901_ReLU", wall)
    print(f"\n{summary['evaluations']} evaluations, {summary['sum_e2e_s']:.1f} s end to end, "
          f"GPU-time floor {summary['sum_floor_s']:.2f} s, ratio "
          f"{fmt(summary['ratio_to_floor'], '.0f')}x; "
          f"{fmt(summary['evaluations_per_hour'], '.0f')} evaluations per "
          f"{'CPU' if args.cpu else 'GPU'}-hour")
    print(f"already compiled ReLU, {summary['repeats_correct']} of {args.repeats} repeats "
          f"correct: median end to end "
          f"{fmt(summary['repeat_e2e_median_s'])} s, candidate median spread "
          f"{fmt(summary['repeat_candidate_median_spread'], '.2%')}, at least "
          f"{summary['repeat_trials_min']} correctness trials each")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1,
                                              default=str))
    ok = len(rows) == len(items) and all(r["verdict"] == "correct" for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
