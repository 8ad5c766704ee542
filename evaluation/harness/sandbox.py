"""Runner side of the evaluator: `run_job` starts the sandboxed judge process tree and waits.

The runner process (which may hold database credentials and secrets) never imports the
candidate's code or torch here. The sandbox: a fresh temporary working folder (removed after), a
new session whose whole process group is killed at the wall-clock limit, resource limits, a
scrubbed environment, and, where the host allows `unshare`, no network and a pid namespace (so
every process the candidate starts dies with the judge).
"""

from __future__ import annotations

import json
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import EVALUATOR_VERSION
from .config import JobError, normalize_job
from .errors import signal_name, truncate
from .process import LogCapture

# The folder that holds the `evaluation` package: the only entry the children need on PYTHONPATH.
_IMPORT_ROOT = str(Path(__file__).resolve().parents[2])

# Variables that may pass into the sandbox; everything else (DJANGO_SETTINGS_MODULE,
# DATABASE_URL, REDIS_URL, SECRET_KEY, tokens, ...) is dropped.
ENV_ALLOWLIST = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE",
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH",
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
    "CC", "CXX", "MAX_JOBS", "OMP_NUM_THREADS",
)

_UNSHARE_VARIANTS = (
    # Strongest first: no network, and a pid namespace whose init is the judge: when it dies the
    # kernel kills every process in it, even ones that left the process group.
    ("network+pid", ["unshare", "--net", "--pid", "--fork", "--kill-child"]),
    ("network", ["unshare", "--net"]),
)
_isolation_cache: tuple[str, list[str]] | None = None
_isolation_lock = threading.Lock()


def isolation_prefix() -> tuple[str, list[str]]:
    """The strongest `unshare` variant that works here (probed once), or ('none', [])."""
    global _isolation_cache
    with _isolation_lock:
        if _isolation_cache is None:
            _isolation_cache = ("none", [])
            if shutil.which("unshare") and os.environ.get("KB_HARNESS_NO_UNSHARE") != "1":
                for name, prefix in _UNSHARE_VARIANTS:
                    try:
                        ok = subprocess.run(
                            [*prefix, "true"], capture_output=True, timeout=10
                        ).returncode == 0
                    except (OSError, subprocess.TimeoutExpired):
                        ok = False
                    if ok:
                        _isolation_cache = (name, prefix)
                        break
        return _isolation_cache


def scrubbed_env(job: dict, workdir: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    tmp = workdir / "tmp"
    tmp.mkdir(exist_ok=True)
    build_root = Path(job["build_dir"]) if job.get("build_dir") else workdir / "build"
    env.update({
        "HOME": str(workdir),
        "TMPDIR": str(tmp),
        "PYTHONPATH": _IMPORT_ROOT,
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",  # prints reach the log even if the candidate is killed
        "TORCH_EXTENSIONS_DIR": str(build_root / "ext"),
        "TRITON_CACHE_DIR": str(build_root / "triton"),
    })
    if job["backend"] == "triton" and job["device"] == "cpu":
        env["TRITON_INTERPRET"] = "1"  # triton kernels run on the CPU through its interpreter
    return env


def json_safe(value: Any) -> Any:
    """Make the result storable as JSON anywhere (no NaN/inf, no tuples or odd types)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return str(value)


def _base_result(job: dict | None) -> dict[str, Any]:
    return {
        "verdict": "harness_error",
        "correct": False,
        "error": "",
        "traceback": "",
        "compile_log": "",
        "trials": [],
        "candidate": None,
        "reference": None,
        "speedup": None,
        "flags": [],
        "environment": {},
        "seeds": {"server": job.get("seed")} if job else {},
        "phases": {},
        "logs": {"stdout": "", "stderr": ""},
        "evaluator_version": EVALUATOR_VERSION,
        "pids": [],
    }


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_tagged(token: str) -> int:
    """Kill every process whose environment carries this evaluation's token.

    The backstop where no pid namespace is available: a process that left the process group
    (setsid) survives killpg, but still carries the environment it inherited.
    """
    needle = f"KB_EVAL_TOKEN={token}".encode()
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    os.kill(int(entry), signal.SIGKILL)
                    killed += 1
        except (OSError, ValueError):
            continue
    return killed


def run_job(job: dict, *, on_event: Callable[[dict], None] | None = None) -> dict:
    """Evaluate `job` in a sandboxed process tree; block until done; return the result dict."""
    t_begin = time.monotonic()

    def emit(event: dict) -> None:
        if on_event is not None:
            try:
                on_event(event)
            except Exception:
                pass

    emit({"type": "phase", "phase": "starting"})
    try:
        job = normalize_job(job)
    except JobError as exc:
        result = _base_result(None)
        result["error"] = f"bad job: {exc}"
        emit({"type": "phase", "phase": "done"})
        return result

    limit = job["time_limit_s"]
    # The judge stops itself a little earlier, so that it can still report (with the logs).
    job["deadline_epoch"] = time.time() + limit - min(10.0, max(1.0, 0.1 * limit))
    isolation, prefix = isolation_prefix()
    workdir = Path(tempfile.mkdtemp(prefix="kbeval-"))
    os.chmod(workdir, 0o700)
    result: dict[str, Any] | None = None
    last_progress: dict[str, Any] = {}
    judge_log: dict[str, str] = {}
    t_spawn = time.monotonic()
    process_start_s: float | None = None
    timed_out = False
    try:
        job_r, job_w = os.pipe()
        ev_r, ev_w = os.pipe()
        cmd = [*prefix, sys.executable, "-m", "evaluation.harness.judge",
               "--job-fd", str(job_r), "--event-fd", str(ev_w)]
        token = os.urandom(12).hex()
        env = scrubbed_env(job, workdir)
        env["KB_EVAL_TOKEN"] = token  # marks every process of this evaluation (see _kill_tagged)
        proc = subprocess.Popen(
            cmd,
            cwd=str(workdir),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(job_r, ev_w),
            start_new_session=True,  # its own process group, killed as a whole
        )
        os.close(job_r)
        os.close(ev_w)
        out_log = LogCapture(proc.stdout, 16 * 1024)
        err_log = LogCapture(proc.stderr, 16 * 1024)

        def send_job() -> None:
            try:
                with os.fdopen(job_w, "wb") as f:
                    f.write(json.dumps(job).encode())
            except OSError:
                pass

        threading.Thread(target=send_job, daemon=True).start()

        deadline = t_spawn + limit
        buf = b""
        with os.fdopen(ev_r, "rb", buffering=0) as events:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                ready, _, _ = select.select([events], [], [], left)
                if not ready:
                    continue
                chunk = events.read(65536)
                if not chunk:
                    break  # the judge closed its end: finished or died
                buf += chunk
                while b"\n" in buf and result is None:
                    line, buf = buf.split(b"\n", 1)
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if not isinstance(event, dict):
                        continue
                    if event.get("type") == "result":
                        result = event.get("result")
                        break
                    if process_start_s is None:
                        process_start_s = time.monotonic() - t_spawn
                    if event.get("type") in ("phase", "trial"):
                        last_progress[event["type"]] = event
                    emit(event)
                if result is not None:
                    break  # the judge has said all; what is left of the tree goes below
        # Whatever is left of the tree goes now: leftovers of a finished run, or a timed-out one.
        _kill_group(proc)
        if "pid" not in isolation:
            _kill_tagged(token)
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            rc = None
        judge_log = {"stdout": out_log.text(wait=1.0), "stderr": err_log.text(wait=1.0)}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    if timed_out:
        result = _base_result(job)
        result["verdict"] = "timeout"
        where = last_progress.get("phase", {}).get("phase", "starting")
        if where == "checking" and "trial" in last_progress:
            t = last_progress["trial"]
            where += f", trial {t.get('k')} of {t.get('n')}"
        result["error"] = f"the evaluation exceeded its time limit of {limit:g} s (during {where})"
    elif not isinstance(result, dict):
        result = _base_result(job)
        sig = signal_name(rc) if rc is not None else None
        how = f"crashed: {sig}" if sig else f"exited with status {rc}"
        result["error"] = f"the judge process {how} without a result"
        result["traceback"] = truncate(judge_log.get("stderr", ""), 8000)

    base = _base_result(job)
    for key, value in base.items():
        result.setdefault(key, value)
    env = result.get("environment") or {}
    env["sandbox"] = {
        "isolation": isolation,
        "network_isolated": isolation.startswith("network"),
        "pid_namespace": "pid" in isolation,
        "scrubbed_env": True,
        "fresh_workdir": True,
        "rlimits": dict(job["limits"]),
        "time_limit_s": limit,
    }
    result["environment"] = env
    phases = result.get("phases") or {}
    if process_start_s is not None:
        phases["process_start"] = process_start_s
    phases["total"] = time.monotonic() - t_begin
    result["phases"] = phases
    result["correct"] = result.get("verdict") == "correct"
    emit({"type": "phase", "phase": "done"})
    return json_safe(result)
