"""Drain a queue of mixed submissions through a real `manage.py runner` and print what happened.

    python3 scripts/runner_check.py --kernelbench PATH [--devices 0,1] [--copies N]
    python3 scripts/runner_check.py --kernelbench PATH --set level1 --copies 5 --precompile
    python3 scripts/runner_check.py --cpu          # the same on this machine's CPU runner

It sets up a throwaway SQLite site, imports the problems the kernels are for, submits correct,
wrong, crashing, hanging and out-of-memory kernels, starts one runner command (all GPUs unless
--devices says otherwise), waits until every submission is finished, and prints a table with
each evaluation's verdict, timings and phases, the wall time, the evaluations per hour, and
whether two evaluations ever overlapped on one device. Django comes from the carried wheels on
the GPU host (see scripts/gpu_check.sh).
"""

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# A lent GPU host may give the runner no cgroup of its own: the checks run there anyway, the
# runner saying so in a warning line (RUNNER_REQUIRE_CGROUPS).
os.environ.setdefault("RUNNER_REQUIRE_CGROUPS", "0")
sys.path.insert(0, str(REPO))

# (problem file relative to the KernelBench folder, kernel file relative to the repo, backend)
GPU_SET = [
    ("level1/19_ReLU.py", "bench/kernels/level1_19_ReLU_cuda.py", "cuda"),
    ("level1/19_ReLU.py", "bench/kernels/level1_19_ReLU_cuda.py", "cuda"),  # compiled: cache hit
    ("level1/19_ReLU.py", "bench/kernels/level1_19_ReLU_triton.py", "triton"),
    ("level1/19_ReLU.py", "bench/kernels/faults/segfault.py", "cuda"),
    ("level1/19_ReLU.py", "bench/kernels/faults/illegal_address.py", "cuda"),
    ("level1/19_ReLU.py", "bench/kernels/faults/hang.py", "torch"),
    ("level1/19_ReLU.py", "bench/kernels/faults/out_of_memory.py", "torch"),
    ("level1/19_ReLU.py", "bench/kernels/level1_19_ReLU_cuda.py", "cuda"),  # after the faults
]
for level, name in [
    (1, "1_Square_matrix_multiplication_"),
    (1, "12_Matmul_with_diagonal_matrices_"),
    (1, "88_MinGPTNewGelu"),
    (2, "12_Gemm_Multiply_LeakyReLU"),
    (2, "76_Gemm_Add_ReLU"),
    (2, "86_Matmul_Divide_GELU"),
]:
    for kind in ("right", "wrong"):
        GPU_SET.append(
            (f"level{level}/{name}.py", f"gpu_kernels/level{level}/{name}/{kind}.py", "auto")
        )

# A level 1 drain for a host's throughput (--set level1 --copies 5: 40 evaluations): right and
# wrong kernels of four problems, CUDA, Triton and plain PyTorch, no faults.
LEVEL1_SET = [
    ("level1/19_ReLU.py", "bench/kernels/level1_19_ReLU_cuda.py", "cuda"),
    ("level1/19_ReLU.py", "bench/kernels/level1_19_ReLU_triton.py", "triton"),
    *[item for item in GPU_SET if item[0].startswith("level1/") and "gpu_kernels/" in item[1]],
]

CPU_SET = [
    ("level1/901_Small_ReLU.py", "tests/kernels/relu_correct.py", "torch"),
    ("level1/901_Small_ReLU.py", "tests/kernels/relu_wrong.py", "torch"),
    ("level1/901_Small_ReLU.py", "bench/kernels/faults/hang.py", "torch"),
    ("level1/901_Small_ReLU.py", "bench/kernels/faults/segfault.py", "torch"),
    ("level1/901_Small_ReLU.py", "tests/kernels/relu_correct.py", "torch"),
]


def guess_backend(source: str) -> str:
    if "load_inline" in source and "cuda_sources" in source:
        return "cuda"
    if "@triton.jit" in source:
        return "triton"
    return "torch"


def throwaway_site(*, time_limit: str) -> Path:
    """A throwaway SQLite site in a folder of its own, migrated and set up (Django imported)."""
    var = Path(tempfile.mkdtemp(prefix="kbsite-runner-check-"))
    # Its own secret key (DEBUG is off unless asked for).
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "kbsite.settings",
            "KBSITE_VAR_DIR": str(var),
            "EVALUATION_TIME_LIMIT": time_limit,
            "RUNNER_HEARTBEAT_SECONDS": "2",
            "LOG_LEVEL": "WARNING",
            # One runner and every submission evaluated once: a new record's second evaluation
            # wants another runner (tests/test_reverification.py covers it).
            "REVERIFY_NEW_RECORDS": "0",
            "QUOTA_GPU_SECONDS_PER_DAY": "10000000",  # a drain of many, by one user
        }
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return var


def import_problem(root: Path, problem_file: str):
    """The published problem of a KernelBench file (`level1/19_ReLU.py` under `root`)."""
    from problems.services import FILENAME_PATTERN, problem_upsert

    level_dir, filename = problem_file.split("/")
    match = FILENAME_PATTERN.match(filename)
    return problem_upsert(
        level=int(level_dir.removeprefix("level")),
        number=int(match["number"]),
        name=match["name"],
        source=(root / problem_file).read_text(),
        publish=True,
    ).problem


ROW_HEADER = (f"{'#':>4} {'kernel':48} {'backend':8} {'verdict':14} {'cand ms':>9} "
              f"{'ref ms':>9} {'speedup':>8} {'compile s':>9} {'eval s':>7} {'device':>6}")


def result_row(kernel_file: str, submission, evaluation) -> str:
    """One finished submission as a line of ROW_HEADER's table."""
    if evaluation is None:
        return (f"{submission.pk:>4} {kernel_file[-48:]:48} {submission.backend:8} "
                f"{submission.verdict} (no evaluation stored)")
    phases = evaluation.phases or {}

    def fmt(value, spec=".4g"):
        return "-" if value is None else format(value, spec)

    return (f"{submission.pk:>4} {kernel_file[-48:]:48} {submission.backend:8} "
            f"{evaluation.verdict:14} {fmt(evaluation.candidate_median_ms):>9} "
            f"{fmt(evaluation.reference_median_ms):>9} {fmt(evaluation.speedup, '.3g'):>8} "
            f"{fmt(phases.get('compile'), '.3g'):>9} {fmt(phases.get('wall'), '.3g'):>7} "
            f"{evaluation.runner_name.rsplit(':', 1)[-1]:>6}")


def start_runner(var: Path, slug: str, devices: str = "") -> subprocess.Popen:
    """`manage.py runner` for this site, its output in var/runner.log."""
    runner_args = [sys.executable, "manage.py", "runner", "--hardware", slug]
    if devices:
        runner_args += ["--devices", devices]
    log = open(var / "runner.log", "w")  # noqa: SIM115 (open while the runner runs)
    return subprocess.Popen(runner_args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)


def stop_runner(runner: subprocess.Popen) -> None:
    if runner.poll() is None:
        runner.terminate()
        runner.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", default=str(REPO.parent / "shared" / "kernelbench"))
    parser.add_argument("--cpu", action="store_true", help="use the sample problems on the CPU")
    parser.add_argument("--devices", default="", help="GPUs for the runner (default: all)")
    parser.add_argument("--copies", type=int, default=1, help="submit the whole set N times")
    parser.add_argument("--quick", action="store_true", help="only the ReLU kernels and faults")
    parser.add_argument("--set", choices=("mixed", "level1"), default="mixed",
                        help="mixed: right, wrong, crashing, hanging (default); level1: the "
                        "level 1 right and wrong kernels, no faults")
    parser.add_argument("--precompile", action="store_true",
                        help="build the CUDA kernels into the build cache before the runner "
                        "starts (so that runs with different --devices compare like for like)")
    parser.add_argument("--time-limit", default="120")
    parser.add_argument("--timeout", type=float, default=1500)
    args = parser.parse_args()

    var = throwaway_site(time_limit=args.time_limit)
    from django.contrib.auth import get_user_model

    from evaluation.services import hardware_register
    from gpu_runner.detect import detect
    from problems.services import SAMPLES_DIR
    from submissions.models import Evaluation
    from submissions.services import submission_create

    detected = detect()
    slug = detected.pop("slug")
    hardware = hardware_register(slug=slug, **detected)
    user = get_user_model().objects.create_user("checker")
    problems_root = SAMPLES_DIR if args.cpu else Path(args.kernelbench)
    if args.cpu:
        plan = CPU_SET
    elif args.set == "level1":
        plan = LEVEL1_SET
    else:
        plan = GPU_SET[:8] if args.quick else GPU_SET
    plan = plan * args.copies

    submissions = []
    problems = {}
    for problem_file, kernel_file, backend in plan:
        kernel_path = REPO / kernel_file
        if not kernel_path.exists():
            print(f"skipped (missing): {kernel_file}")
            continue
        if problem_file not in problems:
            problems[problem_file] = import_problem(problems_root, problem_file)
        source = kernel_path.read_text()
        submissions.append(
            (
                kernel_file,
                submission_create(
                    user=user,
                    problem=problems[problem_file],
                    source=source,
                    backend=guess_backend(source) if backend == "auto" else backend,
                    hardware=hardware,
                ),
            )
        )

    print(f"hardware {hardware.slug}: {hardware.name}, {hardware.gpu_count} GPU(s), "
          f"arch {hardware.arch}, torch {hardware.torch_version}, CUDA {hardware.cuda_version}, "
          f"Triton {hardware.triton_version}, driver {hardware.driver_version}, "
          f"peak {hardware.peak_bandwidth_gbs} GB/s; {len(submissions)} submissions queued",
          flush=True)
    print(ROW_HEADER)
    print("-" * len(ROW_HEADER), flush=True)
    spans: dict[str, list[tuple[float, float]]] = {}
    printed: set[int] = set()

    def print_finished() -> None:
        """A row for each submission finished since the last call (as they finish, so that a
        run stopped early still shows what it did)."""
        for kernel_file, submission in submissions:
            if submission.pk in printed:
                continue
            submission.refresh_from_db()
            if submission.status != "finished":
                continue
            printed.add(submission.pk)
            evaluation = Evaluation.objects.filter(submission=submission).first()
            print(result_row(kernel_file, submission, evaluation), flush=True)
            if evaluation is not None:
                spans.setdefault(evaluation.runner_name, []).append(
                    (evaluation.started_at.timestamp(), evaluation.finished_at.timestamp())
                )

    if args.precompile:
        from bench.eval_speed import precompile

        owners = {submission.participant for _, submission in submissions}
        for owner in sorted(owners):
            precompile([(kernel_file, submission.problem, submission.source)
                        for kernel_file, submission in submissions
                        if submission.participant == owner],
                       hardware_is_cpu=hardware.kind == "cpu", owner=owner)

    started = time.monotonic()
    runner = start_runner(var, slug, args.devices)
    try:
        while time.monotonic() - started < args.timeout:
            print_finished()
            if len(printed) == len(submissions):
                break
            if runner.poll() is not None:
                print(f"the runner exited with status {runner.returncode}; see {var}/runner.log")
                print((var / "runner.log").read_text()[-3000:])
                break
            time.sleep(1)
    finally:
        wall = time.monotonic() - started
        stop_runner(runner)
    print_finished()
    finished = sum(len(runs) for runs in spans.values())
    for _, submission in submissions:
        if submission.pk not in printed:
            print(f"{submission.pk:>4} not finished: {submission.status}")
    overlaps = 0
    everything = [span for runs in spans.values() for span in runs]
    drain = (max(b for _, b in everything) - min(a for a, _ in everything)) if everything else 0
    for name, runs in sorted(spans.items()):
        runs.sort()
        overlaps += sum(1 for a, b in zip(runs, runs[1:], strict=False) if a[1] > b[0])
        busy = sum(b - a for a, b in runs)
        print(f"{name.rsplit(':', 1)[-1]:>6}: {len(runs)} evaluations, evaluating "
              f"{100 * busy / drain if drain else 0:.0f}% of the {drain:.1f} s from the first "
              f"start to the last finish")
    print(f"\n{finished}/{len(submissions)} evaluated in {wall:.1f} s wall "
          f"({3600 * finished / wall:.0f} evaluations per hour) on {len(spans)} device slot(s); "
          f"overlapping evaluations on one device: {overlaps}")
    return 0 if finished == len(submissions) and overlaps == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
