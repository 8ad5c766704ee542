"""Profiles through a real `manage.py runner`: the per-kernel table, the roofline and an Nsight
Compute report for a CUDA, a Triton and a PyTorch kernel (issue: where the time goes).

    python3 scripts/profile_check.py --kernelbench PATH [--out DIR]

A throwaway SQLite site, ReLU, GEMM+epilogue and GELU kernels (CUDA, Triton, PyTorch) submitted
and evaluated by one runner;
then an ncu report asked for each, as their owner would (ncu_report_request), made by the same
runner. Prints, per kernel: the verdict, the profiled kernels (own ones marked), the achieved
bandwidth, ncu's status, its cost in seconds and its figures. The rooflines go to --out as SVG.
"""

import argparse
import os
import re
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

# (problem file in the KernelBench folder, kernel file in the repo or "reference": the problem's
# own Model as ModelNew, a plain PyTorch kernel, backend). ReLU has no FLOPs to place on a
# roofline; GELU and a GEMM with an epilogue have.
KERNELS = [
    ("level1/19_ReLU.py", "bench/kernels/level1_19_ReLU_cuda.py", "cuda"),
    ("level2/76_Gemm_Add_ReLU.py", "gpu_kernels/level2/76_Gemm_Add_ReLU/right.py", "cuda"),
    ("level1/88_MinGPTNewGelu.py", "gpu_kernels/level1/88_MinGPTNewGelu/right.py", "triton"),
    ("level1/88_MinGPTNewGelu.py", "reference", "torch"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", default=str(REPO.parent / "shared" / "kernelbench"))
    parser.add_argument("--out", default=os.environ.get("OUT", ""))
    parser.add_argument("--timeout", type=float, default=500)
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="kbprofile-"))
    var = Path(tempfile.mkdtemp(prefix="kbsite-profile-check-"))
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "kbsite.settings",
        "KBSITE_VAR_DIR": str(var),
        "EVALUATION_TIME_LIMIT": os.environ.get("EVALUATION_TIME_LIMIT", "240"),
        "RUNNER_HEARTBEAT_SECONDS": "2",
        "LOG_LEVEL": "WARNING",
        "REVERIFY_NEW_RECORDS": "0",
    })
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model

    from evaluation.profiles import profile_view
    from evaluation.services import hardware_register
    from gpu_runner.detect import detect
    from scripts.runner_check import import_problem
    from submissions.models import Evaluation, NcuReport
    from submissions.ncu_reports import ncu_report_request
    from submissions.services import submission_create

    detected = detect()
    slug = detected.pop("slug")
    hardware = hardware_register(slug=slug, **detected)
    user = get_user_model().objects.create_user("profiler")
    problems = {}
    submissions = []
    for problem_file, path, backend in KERNELS:
        reference = (Path(args.kernelbench) / problem_file).read_text()
        if problem_file not in problems:
            problems[problem_file] = import_problem(Path(args.kernelbench), problem_file)
        source = (re.sub(r"\bModel\b", "ModelNew", reference) if path == "reference"
                  else (REPO / path).read_text())
        label = f"{problem_file}: {path}"
        submissions.append((label, submission_create(
            user=user, problem=problems[problem_file], source=source, backend=backend,
            hardware=hardware)))
    print(f"hardware {hardware.slug}: {hardware.name}, peak {hardware.peak_bandwidth_gbs} GB/s, "
          f"{hardware.peak_tflops} TFLOP/s", flush=True)
    log = open(var / "runner.log", "w")  # noqa: SIM115 (open while the runner runs)
    runner = subprocess.Popen([sys.executable, "manage.py", "runner", "--hardware", slug],
                              cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    started = time.monotonic()
    reports: dict[int, NcuReport] = {}
    try:
        while time.monotonic() - started < args.timeout:
            for path, submission in submissions:
                submission.refresh_from_db()
                if submission.status == "finished" and submission.pk not in reports:
                    reports[submission.pk] = ncu_report_request(user=user, submission=submission)
                    print(f"{path}: {submission.verdict}; ncu report queued", flush=True)
            done = [r for r in reports.values()
                    if NcuReport.objects.get(pk=r.pk).status not in NcuReport.OPEN]
            if len(done) == len(submissions):
                break
            if runner.poll() is not None:
                print((var / "runner.log").read_text()[-3000:])
                break
            time.sleep(1)
    finally:
        runner.terminate()
        runner.wait(timeout=60)
    failures = 0
    for path, submission in submissions:
        print(f"\n=== {path} ({submission.backend}) ===")
        evaluation = Evaluation.objects.filter(submission=submission).first()
        if evaluation is None:
            print("no evaluation")
            failures += 1
            continue
        print(f"verdict {evaluation.verdict}, candidate {evaluation.candidate_median_ms} ms, "
              f"profile phase {(evaluation.phases or {}).get('profile', 0):.2f} s")
        view = profile_view(evaluation)
        if view is None:
            print("no profile stored")
            failures += 1
        else:
            for side in view["sides"]:
                print(f"  {side['label']}: {side['total_text']}; memory "
                      f"{side['bandwidth_text'] or '-'}; compute {side['compute_text'] or '-'}")
                for k in side["kernels"][:4]:
                    print(f"    {'*' if k['own'] else ' '} {k['name'][:70]:70} x{k['calls']} "
                          f"{k['time']:>12} {k['share_text']:>7}")
        report = reports.get(submission.pk)
        if report is None:
            failures += 1
            continue
        report.refresh_from_db()
        print(f"  ncu: {report.status} in {report.seconds or 0:.1f} s, {report.ncu_version}; "
              f"report file {report.report_size} bytes; {report.message[:300]}")
        for k in report.kernels[:4]:
            print(f"    {k.get('name', '?')[:60]:60} {k.get('duration_ns', 0):>8.0f} ns "
                  f"compute {k.get('compute_pct', 0):5.1f}% memory {k.get('memory_pct', 0):5.1f}% "
                  f"occupancy {k.get('occupancy_pct', 0):5.1f}% "
                  f"dram {k.get('dram_bytes', 0):.3g} B "
                  f"flops {k.get('flops', 0):.3g} stalls {k.get('stalls')}")
        if report.status != NcuReport.Status.DONE:
            failures += 1
        full = profile_view(evaluation, ncu_kernels=report.kernels)
        print(f"  roofline: {'drawn' if full and full['roofline'] else 'nothing to place'}")
        if full and full["roofline"]:
            name = f"roofline_{submission.pk}_{submission.backend}.svg"
            (out / name).write_text(str(full["roofline"]))
            print(f"  roofline: {out / name}")
        if report.text:
            (out / f"ncu_{submission.pk}_{submission.backend}.txt").write_text(report.text)
    print(f"\n{len(submissions) - failures}/{len(submissions)} kernels with a profile and a "
          "finished ncu report")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
