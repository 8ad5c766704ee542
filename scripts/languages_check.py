"""The kernel languages beside CUDA and Triton (issue 39) through a real `manage.py runner`.

    python3 scripts/languages_check.py --kernelbench PATH [--languages helion,tilelang,cute,cutile]

It sets up a throwaway SQLite site (scripts/runner_check.py's), starts one runner, and waits
for its self-test: the languages it offers, and why it leaves any out. For each language
offered it imports the problems and submits our kernels of gpu_kernels/languages/LANGUAGE/
(CASES): a right and a wrong kernel on level1/19_ReLU, on a level 1 matmul and on a level 2
fused GEMM, a kernel defined but never launched, and one that falls back to PyTorch at the
problem's size. Once they are finished it submits the right kernels again (the warm pass: their
builds are in the owner's build cache), then prints each result against what it must get:

- right: ranks (correct, no flag) with a speedup;
- wrong: incorrect, with a diagnosis of the failed trial;
- never launched, falls back: flagged backend_not_used.

and each language's first and warm evaluation times. A language the runner does not offer
fails the check, unless its compiler does not target this GPU (cuTile on a Hopper one), which
the runner's log says. Exits 0 only when every expectation holds. Needs a CUDA GPU; Django and
the languages' packages come from the carried wheels on the GPU host (scripts/gpu_check.sh
languages). On a host without a GPU it says so and exits 2.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.runner_check import (  # noqa: E402
    ROW_HEADER,
    import_problem,
    result_row,
    start_runner,
    stop_runner,
    throwaway_site,
)

LANGUAGES = ("helion", "tilelang", "cute", "cutile")
KERNELS = REPO / "gpu_kernels" / "languages"
RELU = "level1/19_ReLU.py"
MATMUL = "level1/1_Square_matrix_multiplication_.py"
FUSED = "level2/76_Gemm_Add_ReLU.py"
# (problem file under the KernelBench folder, kernel file in KERNELS/LANGUAGE/, what it must get)
CASES = [
    (RELU, "relu_right.py", "right"),
    (RELU, "relu_wrong.py", "wrong"),
    (MATMUL, "matmul_right.py", "right"),
    (MATMUL, "matmul_wrong.py", "wrong"),
    (FUSED, "gemm_add_relu_right.py", "right"),
    (FUSED, "gemm_add_relu_wrong.py", "wrong"),
    (RELU, "never_launched.py", "unused"),
    (RELU, "falls_back.py", "unused"),
]
# What a runner's log says of a language its compiler cannot target on this GPU (detect.py's
# self-test, Backend.unsupported_arch): not a failure of the check.
ARCH_REFUSAL = re.compile(r"self-test: (\w+) not offered: .* needs a GPU of compute capability")


def expectation_failure(expected: str, evaluation) -> str:
    """Why a finished evaluation is not what a kernel of this kind must get; "" when it is."""
    if evaluation is None:
        return "no evaluation stored"
    flags = [str(f.get("name") if isinstance(f, dict) else f) for f in evaluation.flags or []]
    if expected == "right":
        if not evaluation.ranks:
            return f"{evaluation.verdict} {flags}: does not rank"
        if evaluation.speedup is None:
            return "no speedup"
    elif expected == "wrong":
        if evaluation.verdict != "incorrect":
            return f"{evaluation.verdict}, not incorrect"
        if not any(trial.get("diagnosis") for trial in evaluation.trials or []):
            return "incorrect without a diagnosis"
    elif expected == "unused":
        if "backend_not_used" not in flags:
            return f"{evaluation.verdict} {flags}: not flagged backend_not_used"
    else:
        raise ValueError(f"unknown expectation {expected!r}")
    return ""


def wait_for_self_test(runner, timeout: float):
    """The hardware row once the runner has self-tested and registered (None if it did not)."""
    from evaluation.models import Runner

    started = time.monotonic()
    while time.monotonic() - started < timeout and runner.poll() is None:
        row = Runner.objects.select_related("hardware").order_by("-started_at").first()
        if row is not None:
            return row.hardware
        time.sleep(1)
    return None


def submit(user, hardware, problems: dict, root: Path, language: str, cases) -> list:
    from submissions.services import submission_create

    queued = []
    for problem_file, kernel_name, expected in cases:
        kernel_file = f"gpu_kernels/languages/{language}/{kernel_name}"
        if problem_file not in problems:
            problems[problem_file] = import_problem(root, problem_file)
        submission = submission_create(
            user=user, problem=problems[problem_file], source=(REPO / kernel_file).read_text(),
            backend=language, hardware=hardware,
        )
        queued.append((kernel_file, expected, submission))
    return queued


def drain(queued: list, runner, timeout: float) -> dict[int, object]:
    """Wait until every queued submission is finished, printing each as it finishes, with
    whether it got what it must. Submission pk -> its evaluation (None if none was stored)."""
    from submissions.models import Evaluation

    done: dict[int, object] = {}
    started = time.monotonic()
    while len(done) < len(queued) and time.monotonic() - started < timeout:
        for kernel_file, expected, submission in queued:
            if submission.pk in done:
                continue
            submission.refresh_from_db()
            if submission.status != "finished":
                continue
            evaluation = Evaluation.objects.filter(submission=submission).first()
            done[submission.pk] = evaluation
            why = expectation_failure(expected, evaluation)
            print(f"{result_row(kernel_file, submission, evaluation)}  {expected:6} "
                  f"{'ok' if not why else 'FAILED: ' + why}", flush=True)
            if why and evaluation is not None and evaluation.error:
                print(f"       {evaluation.error.splitlines()[0][:150]}", flush=True)
        if runner.poll() is not None:
            print(f"the runner exited with status {runner.returncode}")
            break
        time.sleep(1)
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", default=str(REPO.parent / "shared" / "kernelbench"))
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    parser.add_argument("--time-limit", default="300")
    parser.add_argument("--self-test-timeout", type=float, default=600)
    parser.add_argument("--timeout", type=float, default=1200, help="each pass's limit in s")
    args = parser.parse_args()
    languages = [name for name in args.languages.split(",") if name]
    unknown = sorted(set(languages) - set(LANGUAGES))
    if unknown:
        parser.error(f"unknown languages {unknown}: one of {', '.join(LANGUAGES)}")

    # The runner does only this check's work: no validations of the problems asked for.
    os.environ.setdefault("RUNNER_VALIDATE_MISSING", "0")
    var = throwaway_site(time_limit=args.time_limit)
    from django.contrib.auth import get_user_model

    from gpu_runner.detect import detect

    runner = start_runner(var, detect()["slug"])
    failures = 0
    passes: dict[str, tuple[list, dict]] = {}
    try:
        hardware = wait_for_self_test(runner, args.self_test_timeout)
        log = (var / "runner.log").read_text()
        print("\n".join(line for line in log.splitlines() if "self-test:" in line))
        if hardware is None:
            print(f"no runner registered within {args.self_test_timeout:g} s\n{log[-3000:]}")
            return 1
        print(f"hardware {hardware.slug}: {hardware.name}, arch {hardware.arch}, torch "
              f"{hardware.torch_version}, Triton {hardware.triton_version}; offers "
              f"{', '.join(hardware.backends)}", flush=True)
        if hardware.kind == hardware.Kind.CPU:
            print("these languages run on a CUDA GPU only, and this host has none")
            return 2
        arch_refused = set(ARCH_REFUSAL.findall(log))
        offered = [name for name in languages if name in hardware.backends]
        for name in sorted(set(languages) - set(offered)):
            if name in arch_refused:
                print(f"{name}: not offered, its compiler does not target this GPU (expected)")
            else:
                failures += 1
                print(f"{name}: not offered: FAILED")
        # A new owner each run: its kernels' first pass builds cold even where the build cache
        # is kept between runs (the self-test's starters, under an owner of their own, then
        # build once per host).
        user = get_user_model().objects.create_user(f"languages-checker-{time.time_ns()}")
        problems: dict = {}
        root = Path(args.kernelbench)
        rights = [case for case in CASES if case[2] == "right"]
        for name, cases in (("first", CASES), ("warm", rights)):
            queued = [item for language in offered
                      for item in submit(user, hardware, problems, root, language, cases)]
            print(f"\n{name} pass: {len(queued)} submissions\n{ROW_HEADER}\n"
                  f"{'-' * len(ROW_HEADER)}", flush=True)
            passes[name] = (queued, drain(queued, runner, args.timeout))
    finally:
        stop_runner(runner)

    for queued, done in passes.values():
        failures += sum(1 for _, expected, submission in queued
                        if expectation_failure(expected, done.get(submission.pk)))
    print("\nevaluation wall time of the right kernels, s: median (each)")
    for language in offered:
        print(f"{language:10}", ", ".join(
            f"{name} {_walls(queued, done, language)}" for name, (queued, done) in passes.items()
        ))
    print(f"\n{'LANGUAGES CHECK PASSED' if not failures else f'{failures} FAILED'}")
    return 1 if failures else 0


def _walls(queued: list, done: dict, language: str) -> str:
    walls = [(done[s.pk].phases or {}).get("wall") for kernel_file, expected, s in queued
             if kernel_file.split("/")[2] == language and expected == "right"
             and done.get(s.pk) is not None]
    walls = [w for w in walls if w is not None]
    if not walls:
        return "-"
    return f"{statistics.median(walls):.1f} ({', '.join(f'{w:.1f}' for w in walls)})"


if __name__ == "__main__":
    sys.exit(main())
