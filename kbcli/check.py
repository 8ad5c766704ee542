"""`kb check`: the site's evaluation of a kernel, run on this machine before it costs quota.

It runs the harness the site's runners run (evaluator.runner.sandbox.run_job: the judge, the
candidate's sandboxed worker, the same trials, exploit checks and timing) on a job built as a
runner builds it (gpu_runner/services.py build_job), and prints what the site would show: the
verdict, exploits and notes, the failed trial's diagnosis, both medians and the speedup.

What only the site knows stays out: its secret seeds (a fresh random seed here, printed so a
run can be repeated), the hardware's peak rates (so no speed-of-light flag), re-verification
and ranking. The harness is plain Python (no Django), and only it is imported here: this
command reads the problem from the site over HTTP like every other `kb` command.

Only `kb check` imports this module (kbcli.main, when the command runs): the client's own
distribution (kbcli/pyproject.toml) holds no evaluator, and its other commands run without it.
Its options are kbcli.main's (check_arguments), so `kb --help` needs no evaluator either.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator import backends
from evaluator import flags as flag_kinds
from evaluator.config import (
    DEFAULT_N_TRIALS,
    DEFAULT_TIME_LIMIT_S,
    JobError,
    normalize_job,
)
from evaluator.runner import sandbox
from evaluator.types import Job, Result
from kbcli import config, exits
from kbcli.client import Client
from kbcli.diagnosis import diagnosis_lines
from kbcli.files import read_kernel

EXIT_OK = exits.OK
EXIT_FAILED = exits.FAILED  # not correct, or flagged as an exploit: the site would not rank it
EXIT_USAGE = exits.USAGE

# As the runner's build_job and the site's defaults (EVALUATION_TIME_LIMIT): the same number
# of trials and the same time before a `timeout` verdict, from the evaluator's configuration.
N_TRIALS = DEFAULT_N_TRIALS
TIME_LIMIT_S = DEFAULT_TIME_LIMIT_S
# The build cache keeps its entries per owner; here there is one owner, this user.
BUILD_OWNER = "local"
TAIL_LINES = 15  # of a traceback or compiler output shown under a failed verdict


class CheckError(Exception):
    """What keeps the check from starting (a file, a problem, an option); said to the user."""


@dataclass
class Reference:
    """The problem a kernel is checked against: its source and the tolerances that apply."""

    name: str  # the problem's slug, or the reference file's name
    source: str
    precision: str = "fp32"
    # Per precision; a precision missing here gets the harness's default (normalize_job).
    tolerances: dict[str, dict[str, float]] = field(default_factory=dict)


def read_text(path: Path) -> str:
    try:
        return read_kernel(path)
    except ValueError as error:
        raise CheckError(f"{path}: {error}") from None


def file_reference(path: Path) -> Reference:
    """A local KernelBench problem file: fp32 and the default tolerances, as the site gives a
    problem imported without its own."""
    return Reference(name=path.name, source=read_text(path))


def site_reference(problem: dict[str, Any]) -> Reference:
    """The reference from the site's problem detail (GET /api/v1/problems/LEVEL/NUMBER/)."""
    if not problem.get("source"):
        raise CheckError(f"the reference of {problem.get('slug')} is not public on the site: "
                         "check against a local copy with --reference FILE")
    tolerances = dict(problem.get("tolerances") or {})
    if problem.get("atol") is not None and problem.get("rtol") is not None:
        # The problem's own precision, also from servers that predate `tolerances`.
        tolerances.setdefault(problem["precision"],
                              {"atol": problem["atol"], "rtol": problem["rtol"]})
    return Reference(name=problem["slug"], source=problem["source"],
                     precision=problem.get("precision") or "fp32", tolerances=tolerances)


def fetch_reference(client: Client, slug: str) -> Reference:
    listed = client.problem_by_slug(slug)
    return site_reference(client.problem(listed["level"], listed["number"]))


def build_cache_dir() -> Path:
    """Compiled extensions and Triton kernels kept between checks, as a runner keeps them."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kb" / "build"


def build_job(reference: Reference, candidate: str, *, backend: str, precision: str | None,
              device: str, seed: int | None = None, build_dir: Path | None = None) -> Job:
    """The job a runner would build for this submission (normalized, defaults filled in);
    raises CheckError where the harness would refuse it."""
    precision = precision or reference.precision
    tolerance = reference.tolerances.get(precision) or {}
    job: Job = {
        "mode": "evaluate",
        "reference_source": reference.source,
        "candidate_source": candidate,
        "backend": backend,
        "precision": precision,
        "atol": tolerance.get("atol"),
        "rtol": tolerance.get("rtol"),
        "device": device,
        "n_trials": N_TRIALS,
        "build_dir": str(build_dir) if build_dir else None,
        "build_owner": BUILD_OWNER,
        # Unknown here: a result past the hardware's speed of light is flagged on the site only.
        "peak_bandwidth_gbs": None,
        "peak_tflops": {},
        "time_limit_s": TIME_LIMIT_S,
    }
    if seed is not None:
        job["seed"] = seed  # else normalize_job draws one
    try:
        return normalize_job(job)
    except JobError as error:
        raise CheckError(str(error)) from None


PHASES = {
    "starting": "starting the judge and the sandbox",
    "compiling": "loading the kernel",
    "checking": "checking",
    "timing": "timing the kernel and the reference",
    "profiling": "profiling one call",
}


def progress_line(event: dict[str, Any]) -> str:
    """One line for a harness event ("" for those not worth a line)."""
    if event.get("type") == "trial":
        return f"check: trial {event.get('k')} of {event.get('n')}"
    if event.get("type") == "phase" and event.get("phase") in PHASES:
        return f"check: {PHASES[event['phase']]}"
    return ""


def run(job: Job, on_event: Callable[[dict], None] | None = None) -> Result:
    return sandbox.run_job(job, on_event=on_event)


def _text(value: Any) -> str:
    """A log field of the result: text, or {"stdout": ..., "stderr": ...}."""
    if isinstance(value, dict):
        return "\n".join(str(text) for text in value.values() if text)
    return str(value or "")


def first_diagnosis(trials: list[Any] | None) -> dict[str, Any] | None:
    """The failed trial's diagnosis, numbered by its trial (as the site's API gives it)."""
    for trial in trials or []:
        if isinstance(trial, dict) and trial.get("diagnosis"):
            return {"k": trial.get("k"), **trial["diagnosis"]}
    return None


def report(result: Result, *, problem: str, file: str, job: Job) -> dict[str, Any]:
    """The result in the site's terms (the API's evaluation fields): exploits apart from
    notes, the diagnosis of the failed trial."""
    candidate, reference = result.get("candidate") or {}, result.get("reference") or {}
    flags = result.get("flags") or []
    data = {
        "problem": problem,
        "file": file,
        "backend": job["backend"],
        "precision": job["precision"],
        "device": job["device"],
        "seed": job["seed"],
        "n_trials": job["n_trials"],
        "verdict": result.get("verdict"),
        "correct": bool(result.get("correct")),
        "error": result.get("error") or "",
        "flags": flag_kinds.exploits(flags),
        "notes": flag_kinds.described_notes(flags, result.get("checks")),
        "diagnosis": first_diagnosis(result.get("trials")),
        "trials": result.get("trials") or [],
        "candidate_ms": candidate.get("median_ms"),
        "reference_ms": reference.get("median_ms"),
        "speedup": result.get("speedup"),
        "candidate": candidate,
        "reference": reference,
        "compile_log": _text(result.get("compile_log")),
        "traceback": _text(result.get("traceback")),
        "phases": result.get("phases") or {},
        "environment": result.get("environment") or {},
        "evaluator_version": result.get("evaluator_version"),
    }
    data["hint"] = hint(data)
    return data


# KernelBench's largest level-1 inputs are 6 GiB a tensor: on a CPU they outgrow the sandbox's
# memory, and the process is killed while it makes or loads them.
_MEMORY_HINT = ("the problem's tensors may not fit the memory this machine's sandbox allows "
                "(KernelBench's largest level-1 inputs are 6 GiB each): check it on a GPU "
                "(--device cuda), or check the kernel against a smaller reference file")


def hint(data: dict[str, Any]) -> str:
    """What to try next after a failure whose cause is this machine, not the kernel."""
    error = data["error"].lower()
    if data["device"] == "cpu" and data["verdict"] in ("runtime_error", "out_of_memory") and (
            "sigkill" in error or "out of memory" in error):
        return _MEMORY_HINT
    return ""


def exit_code(data: dict[str, Any]) -> int:
    return EXIT_OK if data["verdict"] == "correct" and not data["flags"] else EXIT_FAILED


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def _tail(text: str, lines: int = TAIL_LINES) -> list[str]:
    return text.strip().splitlines()[-lines:] if text.strip() else []


def trials_text(data: dict[str, Any]) -> str:
    trials = [t for t in data["trials"] if isinstance(t, dict)]
    if not trials:
        return "-"
    failed = next((t for t in trials if not t.get("passed")), None)
    if failed is None:
        return f"{len(trials)} of {data['n_trials']} passed"
    # The judge stops at the first failed trial: the later ones never ran.
    return f"trial {failed.get('k')} of {data['n_trials']} failed"


def summary(data: dict[str, Any]) -> str:
    """The check as the site would show the evaluation, in `kb status`'s layout."""
    speedup = data["speedup"]
    rows = [
        ("problem", f"{data['problem']}  ({data['backend']} on {data['device']}, "
                    f"{data['precision']})"),
        ("verdict", data["verdict"] or "-"),
        ("trials", trials_text(data)),
        ("candidate", _ms(data["candidate_ms"])),
        ("reference", _ms(data["reference_ms"])),
        ("speedup", "-" if speedup is None else f"{speedup:.2f}x"),
    ]
    if data["flags"]:
        rows.append(("exploits", ", ".join(data["flags"])))
    rows += [("note", f"{note['name']}: {note['text']}") for note in data["notes"]]
    if data["error"]:
        rows.append(("error", data["error"]))
    if data.get("hint"):
        rows.append(("hint", data["hint"]))
    if data["diagnosis"]:
        lines = diagnosis_lines(data["diagnosis"])
        rows += [("diagnosis" if i == 0 else "", line) for i, line in enumerate(lines)]
    if data["verdict"] != "correct":
        # Only the end of the compiler's output and of the traceback (--json has all).
        for name in ("compile_log", "traceback"):
            rows += [(name.replace("_", " ") if i == 0 else "", line)
                     for i, line in enumerate(_tail(data[name]))]
    rows.append(("seed", f"{data['seed']}  (--seed repeats these inputs)"))
    head = f"Check of {data['file']}: {data['verdict']}"
    if data["verdict"] == "correct" and data["flags"]:
        head += ", flagged (the site keeps it off the boards)"
    return head + "\n" + "\n".join(f"  {name:<10} {value}" for name, value in rows)


def cmd_check(args: argparse.Namespace) -> int:
    try:
        candidate = read_text(Path(args.file))
        if args.reference:
            reference = file_reference(Path(args.reference))
        else:
            saved = config.load()
            reference = fetch_reference(Client(saved.url, saved.token), args.problem)
        try:
            gpu_only = backends.get(args.backend).gpu_only
        except backends.UnknownBackend:
            raise CheckError(f"unknown backend {args.backend!r}: one of "
                             f"{', '.join(backends.NAMES)}") from None
        device = args.device or ("cuda" if gpu_only else "cpu")
        cache = build_cache_dir()
        try:
            cache.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as error:
            raise CheckError(f"cannot make the build cache {cache}: {error.strerror}") from None
        job = build_job(reference, candidate, backend=args.backend, precision=args.precision,
                        device=device, seed=args.seed, build_dir=cache)
    except CheckError as error:
        raise exits.CommandError(str(error), EXIT_USAGE, code="check_refused") from None

    def on_event(event: dict) -> None:
        line = progress_line(event)
        if line:
            print(line, file=sys.stderr, flush=True)

    try:
        result = run(job, on_event)
    except KeyboardInterrupt:
        # Nothing is left running: the judge and its sandbox die with this process.
        print("\nkb: check interrupted", file=sys.stderr)
        return EXIT_FAILED
    data = report(result, problem=reference.name, file=Path(args.file).name, job=job)
    print(json.dumps(data, indent=2) if args.json else summary(data))
    return exit_code(data)
