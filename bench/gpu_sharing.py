"""One GPU, many evaluations: throughput and warm latency before and after sharing, side by side.

    python3 bench/gpu_sharing.py --kernelbench .kernelbench [--copies 5] [--json PATH]
    python3 bench/gpu_sharing.py --kernelbench .kernelbench --mix real --cold --copies 1 \
        --timeout 1500     # issue 41: 62 kernels at KernelBench's real sizes, nothing ahead
    python3 bench/gpu_sharing.py --kernelbench .kernelbench --mix real --cold --copies 1 \
        --big 8 --pairs --restated 30   # 60 kernels, 18 of them on 6 GiB tensors: a stream

On one GPU (device 0), through a real `manage.py runner`, in one run, twice:

  before  RUNNER_EVALUATIONS_PER_GPU=1 and RUNNER_PROFILE_PROCESS=0: one evaluation holds the
          GPU from start to end, and its timed worker makes the profiled call (main before
          issue 22); with --alone-profiler, RUNNER_EVALUATIONS_PER_GPU=1 alone: the
          profiled call in a profiling process too, so that only the sharing differs;
  after   the defaults: several evaluations share the GPU, each timed with it alone
          (evaluator/gate.py), the profiled call in a profiling process started ahead.

The problems are validated on the device first, as on a curated site: their peaks are what
admits evaluations beside each other. Each pass drains a queue of the level 1 mix of
scripts/runner_check.py (right and wrong CUDA, Triton and PyTorch kernels, `--copies` times: 40
evaluations by default), all compiled ahead into the build cache, and reports evaluations per
GPU-hour (from the first claim to the last finish); then submits `--latency` already compiled
right kernels, spread over the mix, one at a time and reports the median warm latency
(submitted -> stored). With `--mix real` the queue is real_mix() instead (twelve problems of 6
GiB tensors among them) and with `--cold` nothing is compiled ahead, each pass building into a
cache of its own; the verdicts that differ between the two passes are listed (there should be
none). Last, the timing proof: each right kernel's candidate median timed alone (before)
against timed while other evaluations ran their untimed phases (after), and the spread of its
repeated medians in each pass.

With `--json PATH`, the figures are written after each pass, and the site's database beside
them (PATH with the suffix .sqlite3): every evaluation's result, to read afterwards.

Each pass's runner starts without its self-test (`--self-test` keeps it): with `--cold` its
CUDA starter's build alone took 63 s of device time in each pass (an H100), before the pass's
first evaluation, so outside every figure above.
"""

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.runner_check import GPU_SET, LEVEL1_SET, guess_backend, import_problem  # noqa: E402

# --cpu: the plumbing only, on the sample problems (a CPU slot never shares its device).
CPU_MIX = [("level1/901_Small_ReLU.py", "tests/kernels/relu_correct.py", "torch"),
           ("level1/901_Small_ReLU.py", "tests/kernels/relu_wrong.py", "torch")]
MIX = LEVEL1_SET


def real_mix(folder: Path, kernelbench: Path, big: int | None = None, *, pairs: bool = False,
             restated: int = 0) -> list:
    """--mix real: our own kernels at KernelBench's real sizes, levels 1 and 2: every elementwise
    level-1 problem of 4096 x 393216 fp32 in CUDA, Triton and PyTorch, right and wrong
    (bench/kernels/activations.py), the right and wrong kernels of gpu_kernels/ (matmuls, level 2
    GEMMs with epilogues) and the ReLU kernels of bench/kernels/. `big`: only the first that
    many of the 4096 x 393216 problems (each is evaluated alone on an 80 GB card); `pairs`: two
    kernels each, not four; `restated`: PyTorch kernels of that many level-2 GEMM problems
    (bench/kernels/restated.py), a stream's many small problems. The 4096 x 393216 problems'
    kernels come spread through the others, as a stream brings them (all first, each waited in
    turn for the one before it while the small ones behind them waited too)."""
    from bench.kernels.activations import write_mix
    from bench.kernels.restated import write_restated

    own = [item for item in GPU_SET if "gpu_kernels/" in item[1]]
    relu = list(dict.fromkeys(item for item in LEVEL1_SET if "bench/kernels/" in item[1]))
    more = write_restated(folder, kernelbench, restated) if restated else []
    return spread_through(write_mix(folder, big, pairs=pairs) + relu, own + more)


def spread_through(few: list, many: list) -> list:
    """`few` spread evenly through `many`; where they are fewer, `many`'s first and last items
    stay first and last (the warm-up evaluation is the mix's last right kernel)."""
    out = list(many)
    # From the back, so that each position still counts `many`'s items before it.
    for index in reversed(range(len(few))):
        out.insert(round((index + 1) * len(many) / (len(few) + 1)), few[index])
    return out

# "after" first: a run that a time limit cuts short still has the new figures.
PASSES = {
    "after": {},
    "before": {"RUNNER_EVALUATIONS_PER_GPU": "1", "RUNNER_PROFILE_PROCESS": "0"},
}

def right_kernels() -> list:
    return [item for item in MIX if "wrong" not in item[1]]


def latency_kernels(count: int) -> list:
    """`count` right kernels spread over the whole mix, its large problems and its small ones
    alike (the drain has compiled them)."""
    right = right_kernels()
    step = max(1, len(right) // max(1, count))
    return [right[i * step % len(right)] for i in range(count)]

# The phases shown first; every other phase an evaluation reports follows them.
PHASES = ("worker_start", "load", "correctness", "gate_wait", "timing", "profile", "teardown",
          "cleanup", "total")


def setup(var: Path, kernelbench: Path):
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "kbsite.settings", "KBSITE_VAR_DIR": str(var),
        "RUNNER_HEARTBEAT_SECONDS": "2", "LOG_LEVEL": "WARNING", "REVERIFY_NEW_RECORDS": "0",
        "QUOTA_GPU_SECONDS_PER_DAY": "10000000", "QUOTA_MAX_QUEUED": "100000",
    })
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model

    from evaluation.services import hardware_register
    from gpu_runner.detect import detect

    detected = detect()
    slug = detected.pop("slug")
    hardware = hardware_register(slug=slug, **detected)
    user = get_user_model().objects.create_user("bench")
    problems = {}
    for problem_file, _, _ in MIX:
        if problem_file not in problems:
            problems[problem_file] = import_problem(kernelbench, problem_file)
    validate(hardware, list(problems.values()))
    return hardware, user, problems


def validate(hardware, problems) -> None:
    """Each problem validated on this device first, as on a curated site: its peak memory is what
    admits its evaluations beside others (gpu_runner/sharing.py)."""
    from gpu_runner.curation import validations_run
    from problems.curation import validation_request

    started = time.monotonic()
    done = validations_run(
        validations=[validation_request(problem=p, hardware=hardware, enqueue=False)
                     for p in problems],
        runner_name="bench", batch_size=len(problems))
    peaks = {v.problem_version.problem.slug: v.peak_memory_bytes for v in done}
    print(f"validated {len(done)} problems in {time.monotonic() - started:.0f} s; peak bytes "
          f"{peaks}", flush=True)


def submit(user, hardware, problems, items):
    from submissions.services import submission_create

    out = []
    for problem_file, kernel_file, backend in items:
        source = (REPO / kernel_file).read_text()
        out.append((kernel_file, submission_create(
            user=user, problem=problems[problem_file], source=source, hardware=hardware,
            backend=guess_backend(source) if backend == "auto" else backend)))
    return out


def wait_finished(submissions, runner, timeout: float, *, progress: bool = False) -> bool:
    """Until every submission has finished. With `progress`, one line each as it finishes: a run
    cut short (a device machine given back) still tells where its time went."""
    from submissions.models import Submission

    ids = [s.pk for _, s in submissions]
    kernel_of = {s.pk: k for k, s in submissions}
    told: set[int] = set()
    start = time.monotonic()
    deadline = start + timeout
    while time.monotonic() < deadline:
        finished = set(Submission.objects.filter(pk__in=ids, status="finished")
                       .values_list("pk", flat=True))
        if progress and finished - told:
            tell_finished(sorted(finished - told), kernel_of, time.monotonic() - start)
            told |= finished
        if len(finished) == len(ids):
            return True
        if runner.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def kernel_label(path: str) -> str:
    """A kernel's file name, with its folder where the name alone says only right or wrong
    (gpu_kernels/level1/NAME/right.py)."""
    kernel = Path(path)
    return kernel.stem if "_" in kernel.stem else f"{kernel.parent.name}/{kernel.stem}"


def tell_finished(ids: list[int], kernel_of: dict[int, str], elapsed: float) -> None:
    """One line per finished submission: its verdict, wall, largest phases, memory wait and
    sharing note, and the error's start where it has one."""
    from submissions.models import Evaluation

    for e in Evaluation.objects.filter(submission_id__in=ids).order_by("finished_at"):
        phases = {k: float(v) for k, v in (e.phases or {}).items()
                  if isinstance(v, (int, float)) and k not in ("total", "wall")}
        largest = sorted(phases.items(), key=lambda kv: -kv[1])[:4]
        top = ", ".join(f"{k} {v:.1f}" for k, v in largest)
        wall = (e.finished_at - e.started_at).total_seconds() if e.started_at else 0.0
        sharing = (e.environment or {}).get("sharing")
        error = f"; error: {(e.error or '')[:160]!r}" if e.error else ""
        print(f"  [{elapsed:6.0f} s] {kernel_label(kernel_of[e.submission_id])}: {e.verdict} in "
              f"{wall:.1f} s ({top}){f'; sharing {sharing}' if sharing else ''}{error}",
              flush=True)


def run_pass(label: str, env: dict, args, hardware, user, problems, var: Path) -> dict:
    from submissions.models import Evaluation

    log = open(var / f"runner-{label}.log", "w")  # noqa: SIM115 (open while the runner runs)
    self_test = {} if args.self_test else {"RUNNER_SELF_TEST": "0"}
    runner = subprocess.Popen(
        [sys.executable, "manage.py", "runner", "--hardware", hardware.slug,
         "--devices", "1" if hardware.kind == "cpu" else "0"],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **self_test, **env})
    out: dict = {"label": label}
    clocks = ClockLog(var / f"clocks-{label}.csv") if hardware.kind != "cpu" else None
    try:
        # One evaluation first: the runner's workers up, their spares started. The mix's last
        # right kernel (in the real mix a small PyTorch one): the warm-up compiles its kernel
        # into the pass's cache ahead of the drain, and the first right kernel is a 6 GiB
        # problem's CUDA one (evaluated cold on an H100: 51 s, 37 s of it the build).
        warm = submit(user, hardware, problems, right_kernels()[-1:])
        wait_finished(warm, runner, 300)
        time.sleep(3)
        drain = submit(user, hardware, problems, MIX * args.copies)
        done = wait_finished(drain, runner, args.timeout, progress=True)
        evaluations = list(Evaluation.objects.filter(submission__in=[s for _, s in drain]))
        first = min(e.started_at for e in evaluations)
        last = max(e.finished_at for e in evaluations)
        span = (last - first).total_seconds()
        out.update(drained=done, evaluations=len(evaluations), span_s=span,
                   per_gpu_hour=3600 * len(evaluations) / span if span else None,
                   verdicts=sorted({e.verdict for e in evaluations}))
        seen = [p for e in evaluations for p in (e.phases or {}) if p not in PHASES]
        out["phases"] = {p: statistics.median([float((e.phases or {}).get(p) or 0.0)
                                               for e in evaluations])
                         for p in (*PHASES, *dict.fromkeys(seen))}
        # Where the profiled call was made: beside the trials (its profiler was up in time),
        # after the timing, or in the timed worker (no profiling process).
        where = [(((e.static_report or {}).get("checks") or {}).get("profiler") or {})
                 for e in evaluations if e.verdict == "correct"]
        out["profiled_beside_trials"] = sum(bool(w.get("beside_trials")) for w in where)
        out["profiled_in_profiling_process"] = sum(w.get("process") == "profiler" for w in where)
        out["profiled_correct"] = len(where)
        # Whether each job found its spare judge and workers already up when it was handed over.
        out["spares_ready"] = sum(bool(((e.environment or {}).get("sandbox") or {}).get(
            "prestarted_ready")) for e in evaluations)
        by_kernel: dict[str, list[float]] = {}
        kernel_of = {s.pk: k for k, s in drain}
        # A right kernel not correct, or a wrong one not incorrect: what it said, and the
        # device's memory at each step (the judge's notes), to read from this run alone.
        out["unexpected"] = [
            {"kernel": kernel_of[e.submission_id], "verdict": e.verdict,
             "error": (e.error or "")[:400],
             "sharing": (e.environment or {}).get("sharing"),
             "memory_gb": ((e.static_report or {}).get("checks") or {}).get("memory_gb"),
             "profiler": ((e.static_report or {}).get("checks") or {}).get("profiler")}
            for e in evaluations
            if e.verdict != ("incorrect" if "wrong" in kernel_of[e.submission_id] else "correct")]
        for e in evaluations:
            if e.verdict == "correct" and e.candidate_median_ms:
                by_kernel.setdefault(kernel_of[e.submission_id], []).append(
                    e.candidate_median_ms)
        out["medians"] = by_kernel
        verdicts: dict[str, list[str]] = {}
        for e in sorted(evaluations, key=lambda e: e.submission_id):
            verdicts.setdefault(kernel_of[e.submission_id], []).append(e.verdict)
        out["verdict_of"] = verdicts
        out["timed"] = timed_windows(evaluations, kernel_of)
        if clocks is not None:
            samples = clocks.samples()
            for t in out["timed"]:
                t["device"] = device_during(samples, *t["window"])
        latencies = []
        for item in latency_kernels(args.latency):
            time.sleep(1.0)  # the previous one's spare gets ready, as between real arrivals
            one = submit(user, hardware, problems, [item])
            wait_finished(one, runner, 300)
            s = one[0][1]
            s.refresh_from_db()
            latencies.append((s.finished_at - s.created_at).total_seconds())
        out["latencies_s"] = latencies
        out["warm_latency_s"] = statistics.median(latencies) if latencies else None
    finally:
        if clocks is not None:
            clocks.stop()
        runner.terminate()
        try:
            runner.wait(timeout=60)
        except subprocess.TimeoutExpired:
            runner.kill()
    return out


class ClockLog:
    """GPU 0's clocks, temperature and power every 100 ms, from nvidia-smi's own loop (one
    process, outside the evaluations): a timing off its kernel's median at lower clocks was
    slowed by the device's state, not by a neighbour."""

    FIELDS = "timestamp,clocks.sm,clocks.mem,temperature.gpu,power.draw"

    def __init__(self, path: Path):
        self.path = path
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", "-i", "0", f"--query-gpu={self.FIELDS}",
                 "--format=csv,noheader,nounits", "-lms", "100"],
                stdout=open(path, "w"), stderr=subprocess.DEVNULL)  # noqa: SIM115
        except OSError:
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def samples(self) -> list[tuple[float, float, float, float, float]]:
        """(epoch, SM MHz, memory MHz, degrees C, watts) per line nvidia-smi wrote."""
        out = []
        for line in self.path.read_text().splitlines() if self.path.exists() else []:
            parts = [p.strip() for p in line.split(",")]
            try:  # nvidia-smi writes its local time: 2026/12/02 05:50:01.123
                day, fraction = parts[0].rsplit(".", 1)
                epoch = time.mktime(time.strptime(day, "%Y/%m/%d %H:%M:%S"))
                out.append((epoch + float("0." + fraction), *map(float, parts[1:5])))
            except (ValueError, IndexError):
                continue
        return out


def device_during(samples: list[tuple], start: float, end: float) -> dict | None:
    """The device's state over a window (the samples within 0.1 s of it): lowest and highest."""
    inside = [s for s in samples if start - 0.1 <= s[0] <= end + 0.1]
    if not inside:
        return None
    return {name: [min(s[i] for s in inside), max(s[i] for s in inside)]
            for i, name in enumerate(("sm_mhz", "mem_mhz", "celsius", "watts"), start=1)}


# A process tree started this long before a timing window may still be creating its CUDA
# contexts and warming up when the window opens.
START_UP_S = 5.0


def timed_windows(evaluations, kernel_of) -> list[dict]:
    """Each correct evaluation's timing window and what the pass's other evaluations did on the
    device meanwhile: the phases of theirs it overlapped (from their phase logs) and the process
    trees started shortly before or during it. To tell a disturbed timing from noise."""
    spans = []  # (evaluation id, what, start, end)
    for e in evaluations:
        report = e.static_report or {}
        log = [(str(n), float(t)) for n, t in report.get("phase_log") or []]
        end = e.finished_at.timestamp() if e.finished_at else None
        for (name, start), nxt in zip(log, [*log[1:], (None, end)], strict=True):
            if nxt[1] is not None:  # teardown too: its processes' contexts end then
                spans.append((e.pk, name, start, nxt[1]))
        launched = ((e.environment or {}).get("sandbox") or {}).get("launched_epoch")
        if launched:
            spans.append((e.pk, "process start", float(launched), float(launched) + START_UP_S))
    out = []
    for e in evaluations:
        window = ((e.static_report or {}).get("timing") or {}).get("window")
        if e.verdict != "correct" or not e.candidate_median_ms or not window or None in window:
            continue
        w0, w1 = float(window[0]), float(window[1])
        overlaps: dict[str, int] = {}
        for pk, what, start, end in spans:
            if pk != e.pk and start < w1 and end > w0:
                overlaps[what] = overlaps.get(what, 0) + 1
        facts = (e.static_report or {}).get("timing") or {}
        # The reference is timed in the same window (in the judge, the candidate in its
        # worker): slowed too, the device or the host was; alone, the candidate's process.
        out.append({"kernel": kernel_of[e.submission_id], "median_ms": e.candidate_median_ms,
                    "reference_ms": e.reference_median_ms, "window": [w0, w1],
                    "overlaps": overlaps,
                    "candidate": {k: (facts.get("candidate") or {}).get(k)
                                  for k in ("n", "rel_err", "flushes", "stopped")}})
    return out


def print_outliers(label: str, timed: list[dict], share: float = 0.005) -> None:
    """The timed evaluations whose median is off its kernel's median in this pass by more than
    `share`, with what ran beside them; then what the pass's timing windows overlapped."""
    by_kernel: dict[str, list[dict]] = {}
    for t in timed:
        by_kernel.setdefault(t["kernel"], []).append(t)
    for t in timed:
        same = by_kernel[t["kernel"]]
        middle = statistics.median(x["median_ms"] for x in same)
        off = (t["median_ms"] - middle) / middle
        if abs(off) > share:
            refs = [x["reference_ms"] for x in same if x["reference_ms"]]
            ref_off = (f"{100 * (t['reference_ms'] / statistics.median(refs) - 1):+.2f}%"
                       if t["reference_ms"] and refs else "not timed")
            print(f"  {label} off its kernel's median by {100 * off:+.2f}% (its reference, "
                  f"timed in the same window: {ref_off}): {t['kernel']} {t['median_ms']:.4f} ms, "
                  f"timing {t['candidate']}, device {t.get('device')}, beside it: "
                  f"{t['overlaps'] or 'nothing'}", flush=True)
    seen: dict[str, int] = {}
    for t in timed:
        for what, count in t["overlaps"].items():
            seen[what] = seen.get(what, 0) + count
    clocks = [t["device"]["sm_mhz"] for t in timed if t.get("device")]
    sm = (f"{min(c[0] for c in clocks):.0f}-{max(c[1] for c in clocks):.0f} MHz" if clocks
          else "not sampled")
    print(f"  {label}: {len(timed)} timing windows; other evaluations' steps beside them: "
          f"{seen or 'none'}; SM clock in them {sm}", flush=True)


def keep_site(var: Path, to: Path) -> None:
    """A copy of the site's database beside the JSON: every evaluation's result, phases and
    environment, to read after the GPU machine has gone."""
    import sqlite3

    source, copy = sqlite3.connect(var / "db.sqlite3"), sqlite3.connect(to)
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()


def spread(values: list[float]) -> float | None:
    """The spread of repeated medians: their standard deviation over their mean (%)."""
    if len(values) < 2:
        return None
    return 100 * statistics.stdev(values) / statistics.fmean(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", default=".kernelbench")
    parser.add_argument("--copies", type=int, default=5, help="the level 1 mix N times (8 each)")
    parser.add_argument("--latency", type=int, default=10, help="one-at-a-time evaluations")
    parser.add_argument("--only", choices=tuple(PASSES), help="one pass only")
    parser.add_argument("--timeout", type=float, default=400)
    parser.add_argument("--json")
    parser.add_argument("--cpu", action="store_true", help="the plumbing on the CPU runner")
    parser.add_argument("--mix", choices=("level1", "real"), default="level1",
                        help="real: our own kernels at KernelBench's real sizes (real_mix)")
    parser.add_argument("--big", type=int, help="with --mix real: how many of its twelve "
                        "4096 x 393216 problems (four kernels each)")
    parser.add_argument("--pairs", action="store_true", help="with --mix real: two kernels "
                        "for each 4096 x 393216 problem (one right, one wrong), not four")
    parser.add_argument("--restated", type=int, default=0, help="with --mix real: add PyTorch "
                        "kernels of this many level-2 GEMM problems (bench/kernels/restated.py)")
    parser.add_argument("--cold", action="store_true",
                        help="nothing compiled ahead: each pass builds into a cache of its own")
    parser.add_argument("--reuse-builds", action="store_true",
                        help="with --cold: the one-per-GPU pass takes the shared pass's builds "
                        "(its verdicts still compared; its throughput then not cold)")
    parser.add_argument("--self-test", action="store_true",
                        help="each pass's runner self-tests its backends as it starts")
    parser.add_argument("--alone-profiler", action="store_true",
                        help="the one-per-GPU pass keeps the profiling process, so that the "
                        "passes differ in sharing alone (issue 41)")
    args = parser.parse_args()
    global MIX
    var = Path(tempfile.mkdtemp(prefix="kbsite-sharing-"))
    if args.cpu:
        MIX, args.kernelbench = CPU_MIX, str(REPO / "problems" / "samples")
    elif args.mix == "real":
        MIX = real_mix(var / "kernels", Path(args.kernelbench), args.big, pairs=args.pairs,
                       restated=args.restated)
    os.environ.setdefault("BUILD_CACHE_DIR", str(var / "builds"))
    hardware, user, problems = setup(var, Path(args.kernelbench))
    print(f"mix: {len(MIX)} kernels on {len(problems)} problems, copies {args.copies}, "
          f"{'cold' if args.cold else 'compiled ahead'}", flush=True)

    if not args.cold:
        from bench.eval_speed import precompile

        precompile([(k, problems[p], (REPO / k).read_text()) for p, k, _ in MIX],
                   hardware_is_cpu=hardware.kind == "cpu", owner=f"user:{user.pk}")
    passes = dict(PASSES)
    if args.alone_profiler:
        # The timed worker's own profiled call starts its CUPTI session (4 to 6.5 s) in each
        # correct evaluation of the one-per-GPU pass: at least 131 s of the 333 s its first 40
        # evaluations took on an H100. With the profiled call made in a profiling process in
        # both passes, what differs is the sharing alone.
        passes["before"] = {"RUNNER_EVALUATIONS_PER_GPU": "1"}
    results = {}
    for label, env in passes.items():
        if args.only and label != args.only:
            continue
        builds = "compiled ahead"
        if args.cold:
            # --reuse-builds: one cache for both passes, filled by the shared pass (run first);
            # the one-per-GPU pass's builds, one at a time, took most of its device time.
            cache = "after" if args.reuse_builds else label
            env = {**env, "BUILD_CACHE_DIR": str(var / f"builds-{cache}")}
            builds = "none ahead" if cache == label else "the shared pass's"
        started = time.monotonic()
        results[label] = run_pass(label, env, args, hardware, user, problems, var)
        r = results[label]
        r["builds"] = builds
        # Each pass's figures as soon as it ends: a run cut short still shows them.
        print(f"{label}: {time.monotonic() - started:.0f} s, {r.get('evaluations')} evaluations "
              f"(drained: {r.get('drained')}), {r.get('per_gpu_hour') or 0:.0f} per GPU-hour, "
              f"warm latency {r.get('warm_latency_s') or 0:.2f} s {r.get('latencies_s')}, "
              f"verdicts {r.get('verdicts')}, profiled beside the trials "
              f"{r.get('profiled_beside_trials')} of {r.get('profiled_correct')} correct "
              f"(in a profiling process {r.get('profiled_in_profiling_process')}), "
              f"spares ready when taken {r.get('spares_ready')} of {r.get('evaluations')}, "
              f"builds {r['builds']}, phases {r.get('phases')}", flush=True)
        print_outliers(label, r.get("timed") or [])
        for item in r.get("unexpected") or []:
            print(f"  unexpected: {item['kernel']}: {item['verdict']}: {item['error']} "
                  f"(sharing {item['sharing']}; profiler {item['profiler']}; memory GB "
                  f"{item['memory_gb']})", flush=True)
        if args.json:  # likewise the file, pass by pass (the last pass's is the whole run's)
            Path(args.json).write_text(json.dumps(results, indent=1, default=str))
            keep_site(var, Path(args.json).with_suffix(".sqlite3"))

    print(f"\n{'':28}" + "".join(f"{label:>12}" for label in results))
    rows = [("evaluations", "evaluations", "d"),
            ("evaluations per GPU-hour", "per_gpu_hour", ".0f"),
            ("median warm latency (s)", "warm_latency_s", ".2f")]
    for title, key, spec in rows:
        print(f"{title:28}" + "".join(f"{format(r.get(key) or 0, spec):>12}"
                                      for r in results.values()))
    for phase in dict.fromkeys(p for r in results.values() for p in r["phases"]):
        print(f"  {phase + ' (median s)':26}" + "".join(
            f"{r['phases'].get(phase, 0):>12.2f}" for r in results.values()))
    if len(results) == 2:
        b, a = results["before"], results["after"]
        differ = {k: (b["verdict_of"][k], a["verdict_of"][k])
                  for k in sorted(set(b.get("verdict_of", {})) & set(a.get("verdict_of", {})))
                  if sorted(b["verdict_of"][k]) != sorted(a["verdict_of"][k])}
        print(f"\nverdicts that differ between the passes: {len(differ)} of "
              f"{len(a.get('verdict_of', {}))} kernels")
        for kernel, (alone, shared) in differ.items():
            print(f"  {kernel}: one per GPU {alone}, shared {shared}")
        print("\nthroughput x{:.2f}, warm latency x{:.2f}".format(
            (a["per_gpu_hour"] or 0) / (b["per_gpu_hour"] or 1),
            (a["warm_latency_s"] or 0) / (b["warm_latency_s"] or 1)))
        print(f"\n{'kernel (candidate medians)':52}{'alone ms':>10}{'shared ms':>11}"
              f"{'diff %':>8}{'spread alone %':>16}{'spread shared %':>17}")
        for kernel in sorted(set(b["medians"]) & set(a["medians"])):
            alone = statistics.median(b["medians"][kernel])
            shared = statistics.median(a["medians"][kernel])
            sa, ss = spread(b["medians"][kernel]), spread(a["medians"][kernel])
            print(f"{kernel[-52:]:52}{alone:>10.4f}{shared:>11.4f}"
                  f"{100 * (shared - alone) / alone:>8.2f}"
                  f"{'-' if sa is None else format(sa, '.2f'):>16}"
                  f"{'-' if ss is None else format(ss, '.2f'):>17}")
    return 0 if all(r.get("drained") for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
