"""Nsight Compute on request: `ncu` on the candidate's own kernels, inside its sandbox.

Never part of a timed evaluation: the runner runs it as a job of its own, after the submission
was evaluated. Both of ncu's passes run in the candidate's sandbox (jail.py), with the owner's
cached build copied into a fresh slot (read back never, so the cache is not touched):

    1. ncu --profile-from-start off ... python -m evaluator.worker.ncu_target
       (the target builds ModelNew, calls it once to compile and warm up, then once between
       cudaProfilerStart and cudaProfilerStop: only that call's kernels are measured)
    2. ncu --import report.ncu-rep --csv --page raw, and --page details: the figures and the text

The target never holds the reference: a private problem's is not its submitter's to read, and
the target runs their code. The call's inputs are drawn before, from the reference's
get_inputs(), by a process of the runner's where no candidate code runs (`python -m
evaluator.judge.ncu_draw`), and handed to the target as a file of plain tensors (INPUTS_FILE).

The report file is written by hostile code, so ncu reads it back inside the sandbox too. What
comes out is size-limited.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evaluator import launcher
from evaluator.config import normalize_job
from evaluator.process import kill_tagged
from evaluator.runner import buildcache, jail
from evaluator.runner.sandbox import scrubbed_env

NCU_ENV = "KB_NCU"  # an explicit ncu binary (else the one on PATH)
INPUTS_FILE = "ncu_inputs.pt"  # the call's inputs, drawn outside the sandbox (draw_inputs)
MAX_KERNELS = 40  # kernels profiled in the one measured call
TEXT_LIMIT = 200_000
REPORT_LIMIT = 32 * 1024 * 1024
# The small metric set: throughput as % of peak, occupancy, L2 and DRAM, warp stalls (the
# sections), and the bytes and FP operations that place a kernel on the roofline.
SECTIONS = ("SpeedOfLight", "Occupancy", "MemoryWorkloadAnalysis", "WarpStateStats",
            "LaunchStats")
ROOFLINE_METRICS = (
    "dram__bytes_read.sum", "dram__bytes_write.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum",
)
# What the page shows per kernel: our name -> ncu's metric.
SUMMARY = {
    "duration_ns": "gpu__time_duration.sum",
    "compute_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
}
_STALL = re.compile(r"^smsp__average_warps?_(?:latency_)?issue_stalled_([a-z0-9_]+?)"
                    r"(?:_per_(?:issue|warp)_active)?\.(?:ratio|pct)$")
_NOT_A_STALL = {"selected", "not_selected"}


def ncu_path() -> str | None:
    explicit = os.environ.get(NCU_ENV)
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return shutil.which("ncu")


def install_of(ncu: str) -> tuple[str, str]:
    """(the folder to bind read-only, the ncu to run). CUDA's bin/ncu is often a wrapper that
    looks for an nsight-compute folder beside CUDA or under /opt/nvidia: the sandbox binds that
    folder and runs its ncu directly."""
    real = os.path.realpath(ncu)
    here = os.path.dirname(real)
    found = [*sorted(glob.glob(os.path.join(here, "..", "nsight-compute*"))),
             *sorted(glob.glob("/opt/nvidia/nsight-compute/*")),
             *sorted(glob.glob("/opt/nvidia/nsight-compute*"))]
    for folder in reversed(found):
        binary = os.path.join(folder, "ncu")
        if os.path.isfile(binary) and os.access(binary, os.X_OK):
            folder = os.path.realpath(folder)
            return folder, os.path.join(folder, "ncu")
    return here, real


def unavailable(message: str) -> dict[str, Any]:
    return {"status": "unavailable", "message": message}


def target_job(job: dict) -> dict[str, Any]:
    """What the target reads in the sandbox: the kernel and how to build and call it; never the
    reference (its inputs come drawn, draw_inputs)."""
    return {k: job[k] for k in ("candidate_source", "backend", "precision", "device", "seed",
                                "limits")}


def draw_inputs(job: dict, path: Path, *, timeout_s: float) -> str | None:
    """Draw the profiled call's init inputs and inputs from the reference into `path` (plain
    tensors, torch.save), in a process of the runner's own where no candidate code runs, on the
    CPU; the target moves them to its device. That process imports nothing from where it runs
    (`-P`; the slot holds the owner's cached build), in a fresh folder with the judge's scrubbed
    environment. Returns None, or why they could not be drawn."""
    spec = {k: job[k] for k in ("reference_source", "seed", "precision")}
    with tempfile.TemporaryDirectory(prefix="kbncu-draw-") as here:
        proc = launcher.start_trusted(
            [sys.executable, "-P", "-m", "evaluator.judge.ncu_draw", str(path)],
            env=scrubbed_env(job, Path(here)), cwd=here, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, err = proc.communicate(json.dumps(spec), timeout=max(timeout_s, 1.0))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return "drawing the problem's inputs ran past the time limit"
    if proc.returncode != 0 or not path.is_file():
        return "the problem's inputs could not be drawn: " + _last_lines(err, 3)
    return None


def run_report(job: dict, *, timeout_s: float = 300.0) -> dict[str, Any]:
    """Profile the job's candidate with ncu in its sandbox. Returns {"status": "done", "text",
    "kernels", "report" (bytes), "ncu_version", "seconds"}, or status "failed"/"unavailable"
    with a message."""
    if job.get("device", "cpu") == "cpu":
        return unavailable("Nsight Compute profiles GPU kernels; this runner serves a CPU.")
    ncu = ncu_path()
    if ncu is None:
        return unavailable("This runner has no Nsight Compute: `ncu` is not on its PATH "
                           f"(or set {NCU_ENV}).")
    job = normalize_job({**job, "mode": "evaluate"})
    workdir = Path(tempfile.mkdtemp(prefix="kbncu-"))
    os.chmod(workdir, 0o711)
    slot = workdir / "slot"
    slot.mkdir()
    started = time.monotonic()
    decision: dict[str, Any] = {}
    token = os.urandom(12).hex()
    try:
        try:
            decision = jail.for_job(job["device"], slot,
                                    int(job["limits"].get("tmpfs_mb") or 2048))
        except jail.SandboxUnavailable as exc:
            return {"status": "failed", "message": f"this runner cannot sandbox code: {exc}"}
        if not launcher.sandboxed(decision):
            return {"status": "failed", "message": "ncu runs only inside the sandbox"}
        ncu_home, ncu_real = install_of(ncu)
        decision = {**decision, "readonly": [*decision["readonly"], ncu_home]}
        buildcache.fill(slot, buildcache.entry_for(job), uid=decision.get("uid"))
        failed = draw_inputs(job, slot / INPUTS_FILE, timeout_s=started + timeout_s
                             - time.monotonic())
        if failed:
            return {"status": "failed", "seconds": time.monotonic() - started,
                    "message": failed}
        _stage_target(slot, job, decision.get("uid"))
        env = {**scrubbed_env(job, workdir), "KB_EVAL_TOKEN": token}
        report = f"{launcher.BUILD}/ncu/report"
        base = [ncu_real, "--clock-control", "none", "--profile-from-start", "off",
                "--target-processes", "all", "--launch-count", str(MAX_KERNELS),
                *[arg for name in SECTIONS for arg in ("--section", name)]]
        tail = ["--export", report, "--force-overwrite", sys.executable, "-m",
                "evaluator.worker.ncu_target", f"{launcher.BUILD}/ncu_job.json",
                f"{launcher.BUILD}/{INPUTS_FILE}"]
        deadline = started + timeout_s
        first = _sandboxed(decision, env, [*base, "--metrics", ",".join(ROOFLINE_METRICS),
                                           *tail], deadline)
        if first["rc"] != 0 and "metric" in first["err"].lower():
            # A metric this ncu or GPU does not know: the sections alone still say most.
            first = _sandboxed(decision, env, [*base, *tail], deadline)
        rep = slot / "ncu" / "report.ncu-rep"
        if first["rc"] != 0 or not rep.is_file():
            return {"status": "failed", "seconds": time.monotonic() - started,
                    "message": "ncu did not produce a report: "
                               + _last_lines(first["err"] or first["out"])}
        raw = _sandboxed(decision, env, [ncu_real, "--import", f"{report}.ncu-rep", "--csv",
                                         "--page", "raw", "--print-units", "base"], deadline)
        details = _sandboxed(decision, env, [ncu_real, "--import", f"{report}.ncu-rep",
                                             "--page", "details"], deadline)
        version = _sandboxed(decision, env, [ncu_real, "--version"], deadline)
        data = rep.read_bytes() if rep.stat().st_size <= REPORT_LIMIT else b""
        kernels = parse_raw_csv(raw["out"])
        return {
            "status": "done",
            "seconds": time.monotonic() - started,
            "text": details["out"][:TEXT_LIMIT],
            "kernels": kernels,
            "report": data or None,
            "ncu_version": _last_lines(version["out"], 1)[:100],
            "message": "" if data else f"the report file is over {REPORT_LIMIT >> 20} MiB; "
                                       "only its figures were kept",
        }
    finally:
        # Whatever of the candidate is left (its processes may have left the group).
        for _ in range(50):
            if kill_tagged(token, uid=decision.get("uid")) == 0:
                break
            time.sleep(0.05)
        buildcache.remove_tree(workdir)


def _stage_target(slot: Path, job: dict, uid: int | None) -> None:
    """The target's job (no reference: target_job) and the report's folder in the slot, owned
    by the sandbox's uid where it has one of its own, beside the drawn inputs."""
    (slot / "ncu_job.json").write_text(json.dumps(target_job(job)))
    (slot / "ncu").mkdir()
    for path in (slot / "ncu_job.json", slot / INPUTS_FILE, slot / "ncu"):
        if uid is not None:
            os.chown(path, uid, uid)


def _sandboxed(decision: dict, env: dict[str, str], argv: list[str],
               deadline: float) -> dict[str, Any]:
    ran = launcher.run_sandboxed(decision, argv, env=env, timeout=deadline - time.monotonic(),
                                 out_limit=4 * TEXT_LIMIT, err_limit=TEXT_LIMIT)
    if ran["timed_out"]:
        ran["out"], ran["err"] = ran["out"][:TEXT_LIMIT], "ncu ran past its time limit"
    return ran


def _last_lines(text: str, n: int = 6) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-n:])[:2000]


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return None


def parse_raw_csv(text: str) -> list[dict[str, Any]]:
    """ncu's raw page (--csv --page raw): a header row of metric names, a row of units, then
    one row per profiled kernel. Returns per kernel its name, every numeric metric, and the
    summary the page shows (SUMMARY, dram bytes, FLOPs, the top warp stalls)."""
    rows = [row for row in csv.reader(io.StringIO(text)) if row]
    start = next((i for i, row in enumerate(rows) if "Kernel Name" in row), None)
    if start is None:
        return []
    header = rows[start]
    kernels = []
    for row in rows[start + 1:]:
        if len(row) != len(header):
            continue
        record = dict(zip(header, row, strict=True))
        if not record.get("ID", "").strip().isdigit():
            continue  # the units row
        metrics = {k: v for k, v in ((k, _number(v)) for k, v in record.items())
                   if v is not None and "__" in k}
        kernels.append(summarize(record.get("Kernel Name", "?"), metrics))
    return kernels


def summarize(name: str, metrics: dict[str, float]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name[:300]}
    for ours, theirs in SUMMARY.items():
        if theirs in metrics:
            out[ours] = metrics[theirs]
    read, write = metrics.get("dram__bytes_read.sum"), metrics.get("dram__bytes_write.sum")
    if read is not None or write is not None:
        out["dram_bytes"] = (read or 0.0) + (write or 0.0)
    flops = 0.0
    counted = False
    for kind in ("f", "h", "d"):
        for op, weight in (("add", 1), ("mul", 1), ("fma", 2)):
            value = metrics.get(f"smsp__sass_thread_inst_executed_op_{kind}{op}_pred_on.sum")
            if value is not None:
                flops += weight * value
                counted = True
    if counted:
        out["flops"] = flops
    stalls = []
    for metric, value in metrics.items():
        match = _STALL.match(metric)
        if match and match.group(1) not in _NOT_A_STALL and value > 0:
            stalls.append((match.group(1), value))
    stalls.sort(key=lambda kv: -kv[1])
    out["stalls"] = [[reason, round(value, 3)] for reason, value in stalls[:4]]
    return out
