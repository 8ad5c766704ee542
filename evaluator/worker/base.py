"""The candidate worker: loads (compiles) ModelNew, runs it on inputs the judge sends.

It never sees the reference, the expected outputs, the server's seed or any input before the
call that uses it, and never decides a verdict: it answers the judge's requests with outputs and
facts (exceptions included), and the judge decides. A timed call is one request: the inputs
arrive with it, the reply carries the whole output and the call's own timing, which the judge
holds against its clock (judge/clock.py).

Nothing starts this module as a program (`-m evaluator.worker.base`). The judge's
WorkerHandle runs `python -c workers.WORKER_ENTRY`, that is probe.main: this module's `main` with
probe.ProbeWorker in place of Worker, inside bubblewrap where the runner's jail decision says so
(evaluator/launcher.py; unsandboxed only with KB_SANDBOX=off, acknowledged). The profiling worker
on a GPU (workers.Profiler) starts the same way, and a runner that keeps a spare judge (pool.py)
starts both before their job arrives. Its stdout/stderr are the candidate's log, so the protocol
uses dedicated pipes.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import hashlib
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from evaluator import backends

CANDIDATE_FILE = "candidate.py"  # in the worker's own working folder
CANDIDATE_MODULE = "kb_candidate"
_MARKER = ".kb_complete"


def _die_with_parent() -> None:
    """If the judge dies, so does the worker (Linux PR_SET_PDEATHSIG)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def outer_pid() -> int:
    """Our pid as the host sees it (differs from os.getpid() inside a pid namespace)."""
    try:
        return int(os.readlink("/proc/self"))
    except (OSError, ValueError):
        return os.getpid()


@contextlib.contextmanager
def capture_fds(path: Path):
    """Send fds 1 and 2 (what compilers and prints write) to a file for the duration."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


def _shared_objects(folder: Path) -> dict[str, float]:
    if not folder.is_dir():
        return {}
    return {str(p): p.stat().st_mtime for p in folder.rglob("*.so")}


class Worker:
    def __init__(self, channel, device: str):
        self.channel = channel
        self.device = device
        self.model = None
        self.sets: Any = None  # the inputs of the profiled call, where the judge sends them
        self.timer: Any = None
        self.keep = (CANDIDATE_FILE,)
        self.runs = 0
        self.threads_before: int | None = None  # the intra-op threads before the calibration

    # Each handler returns (header, value) to send back.
    def handle(self, header: dict, value: Any) -> tuple[dict, Any]:
        cmd = header.get("cmd")
        if cmd == "load":
            return self.load(header, value)
        if cmd == "run":
            return self.run(value)
        if cmd == "ping":  # the judge measures the channel's round trip before the load
            return {"ok": True}, None
        if cmd == "block":
            return self.block(header, value)
        return {"ok": False, "verdict": "harness_error", "error": f"unknown command {cmd!r}"}, None

    def _failure(self, exc: BaseException, default_verdict: str, phase: str) -> dict:
        from evaluator.errors import is_oom, short_message, trimmed_traceback

        verdict = "out_of_memory" if is_oom(exc) else default_verdict
        if isinstance(exc, SystemExit):
            message = f"the candidate called exit({exc.code!r}) during {phase}"
        else:
            message = short_message(exc)
        return {
            "ok": False,
            "verdict": verdict,
            "phase": phase,
            "error": message,
            "traceback": trimmed_traceback(exc, self.keep),
        }

    def load(self, header: dict, init_inputs: Any) -> tuple[dict, Any]:
        import torch

        from evaluator.loading import build_model, module_from_source

        if self.threads_before is not None:  # the calibration's threads, given back
            torch.set_num_threads(self.threads_before)
            self.threads_before = None
        source: str = header["source"]
        backend: str = header["backend"]
        build_dir = header.get("build_dir")
        facts: dict[str, Any] = {"pid": outer_pid()}
        # Extensions are cached by a key covering everything that changes the binary.
        arch = ""
        if self.device != "cpu":
            major, minor = torch.cuda.get_device_capability(torch.device(self.device))
            # sm_90a enables Hopper-only instructions (wgmma, TMA) that kernels may use.
            arch = f"{major}.{minor}" + ("a" if major == 9 else "")
            os.environ["TORCH_CUDA_ARCH_LIST"] = arch
        key_text = "|".join([
            source, backend, torch.__version__, str(torch.version.cuda), arch, sys.version,
        ])
        cache_key = hashlib.sha256(key_text.encode()).hexdigest()[:24]
        root = Path(build_dir) if build_dir else Path.cwd() / "build"
        ext_dir = root / "ext" / cache_key
        ext_dir.mkdir(parents=True, exist_ok=True)
        os.environ["TORCH_EXTENSIONS_DIR"] = str(ext_dir)
        os.environ.setdefault("TRITON_CACHE_DIR", str(root / "triton"))
        for var, folder in backends.CACHE_ENV.items():  # TileLang's, CuTe DSL's, cuTile's
            os.environ.setdefault(var, str(root / folder))
        for var, value in backends.WORKER_ENV.items():
            os.environ.setdefault(var, value)
        cache_hit = (ext_dir / _MARKER).exists()
        before = _shared_objects(ext_dir)
        log_path = Path.cwd() / "compile.log"
        t0 = time.perf_counter()
        try:
            with capture_fds(log_path):
                module = module_from_source(source, CANDIDATE_MODULE, Path.cwd() / CANDIDATE_FILE)
        except BaseException as exc:
            reply = self._failure(exc, "compile_error", "compile")
            reply["compile_log"] = _read_log(log_path) + "\n" + reply["error"]
            return reply, None
        load_s = time.perf_counter() - t0
        after = _shared_objects(ext_dir)
        compiled = any(before.get(p) != m for p, m in after.items())
        facts.update({
            "load_s": load_s,
            "compile_s": load_s if compiled else 0.0,
            "compiled": compiled,
            "cache_hit": cache_hit and not compiled,
            "cache_key": cache_key,
            "compile_log": _read_log(log_path),
            "extensions": sorted(Path(p).name for p in after),
        })
        cls = getattr(module, "ModelNew", None)
        if cls is None or not callable(cls):
            facts.update({"ok": False, "verdict": "compile_error", "phase": "compile",
                          "error": "the source defines no ModelNew class"})
            return facts, None
        try:
            self.model = build_model(
                cls, init_inputs, header["init_seed"], self.device, header["precision"]
            )
            if self.device != "cpu":
                # Its construction's device work ends within the load, a step the judge may
                # hold the device for (and a fault of that work is the construction's).
                torch.cuda.synchronize(torch.device(self.device))
        except BaseException as exc:
            reply = self._failure(exc, "runtime_error", "init")
            reply.update({k: v for k, v in facts.items() if k not in reply})
            return reply, None
        (ext_dir / _MARKER).touch()
        facts["ok"] = True
        return facts, None

    def run(self, inputs: Any) -> tuple[dict, Any]:
        import torch

        from evaluator.loading import clone_value, iter_tensors, synchronize

        flags: list[str] = []
        pristine = clone_value(inputs)
        # The JIT languages (Triton, Helion, TileLang, CuTe DSL, cuTile) compile on the first
        # call: a first call after which their caches hold new files was mostly a compile.
        first = self.runs == 0
        self.runs += 1
        cached = _jit_cache_files() if first else set()
        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                outputs = self.model(*inputs)
            synchronize(self.device)
        except BaseException as exc:
            return self._failure(exc, "runtime_error", "forward"), None
        jit: dict[str, float] = {}
        if first and _jit_cache_files() - cached:
            jit["jit_s"] = time.perf_counter() - t0
        # Honest mistakes caught here (the judge checks what it can on its own side too).
        in_ptrs = {t.untyped_storage().data_ptr() for t in iter_tensors(inputs) if t.numel()}
        for t in iter_tensors(outputs):
            if t.numel() and t.untyped_storage().data_ptr() in in_ptrs:
                flags.append("output_aliases_input")
                break
        for a, b in zip(iter_tensors(inputs), iter_tensors(pristine), strict=False):
            if not torch.equal(a, b):
                flags.append("input_mutated")
                break
        if isinstance(outputs, torch.Tensor):
            value: Any = outputs
        elif isinstance(outputs, (list, tuple)):
            value = tuple(outputs)
        else:
            value = outputs
        return {"ok": True, "flags": flags, "pid": outer_pid(), **jit}, value

    def block(self, header: dict, blocks: Any) -> tuple[dict, Any]:
        """A block of timed calls, one per set of inputs that came with it, one after the other;
        the judge's clock runs around the whole block (judge/clock.py). Between two calls only
        the timer runs: what is checked of each call (its output's types here, more in
        probe.ProbeWorker) is checked once the block's last call returned, its outputs and
        inputs all still alive, so that the per-call path the judge must subtract is as short
        as it can be (on a 2-core host these checks took 30 to 120 us a call, and more after
        long calls, which the judge's calibration could not tell from the candidate's time)."""
        if not isinstance(blocks, list) or not blocks or not all(
                isinstance(b, list) for b in blocks):
            return {"ok": False, "verdict": "harness_error",
                    "error": "a block of calls needs a list of input lists"}, None
        from evaluator.timing import CallTimer, calibration_call

        if self.timer is None:
            self.timer = CallTimer(self.device, flush_l2=bool(header.get("flush_l2", True)))
        calls: list[dict] = []
        outputs: list[Any] = []
        self.use_timed_threads(header.get("cpu_threads"))
        fn = self.model if self.model is not None else calibration_call
        for inputs in blocks:
            reply, out = self.call(fn, inputs, int(header.get("flushes") or 0))
            if not reply.get("ok"):
                return reply, None
            calls.append(reply)
            outputs.append(out)
        self.block_evidence(blocks, calls, outputs)
        return {"ok": True, "calls": calls}, outputs

    def use_timed_threads(self, threads: Any) -> None:
        """The calibration's and the timed calls' intra-op threads on the CPU: the calibration's
        are kept until the load (set back there: the candidate's load and trials keep the
        threads they had): switching back after each calibration call made its path cost more
        than a timed call's (0.05 against 0.02 ms a call on a 2-core host)."""
        import torch

        before = torch.get_num_threads()
        if (self.device == "cpu" and isinstance(threads, int) and threads > 0
                and before != threads):
            torch.set_num_threads(threads)
            if self.model is None and self.threads_before is None:
                self.threads_before = before

    def call(self, fn: Any, inputs: Any, flushes: int) -> tuple[dict, Any]:
        """One timed call on the inputs that came with it (timing.CallTimer). Before the load,
        the judge calibrates the path with a harmless call of its own (judge/clock.py)."""
        try:
            out, facts = self.timer(fn, inputs, flushes)
        except BaseException as exc:
            return self._failure(exc, "runtime_error", "timing"), None
        return {"ok": True, **facts}, tuple(out) if isinstance(out, list) else out

    def block_evidence(self, blocks: list, calls: list[dict], outputs: list[Any]) -> None:
        """What is checked of a block's calls once they all returned. Evidence only (the channel
        sends plain tensors rebuilt from bytes, read inside the judge's interval, whatever this
        says): an output that is not a plain tensor."""
        import torch

        for reply, value in zip(calls, outputs, strict=True):
            leaves = value if isinstance(value, tuple) else (value,)
            reply["exact_types"] = all(type(t) is torch.Tensor for t in leaves
                                       if isinstance(t, torch.Tensor))


def _jit_cache_files() -> set[str]:
    """The files in the JIT languages' cache folders (this evaluation's build slot)."""
    found: set[str] = set()
    for var in ("TRITON_CACHE_DIR", *backends.CACHE_ENV):
        folder = os.environ.get(var)
        if folder:
            for parent, _, files in os.walk(folder):
                found.update(os.path.join(parent, name) for name in files)
    return found


def _read_log(path: Path, limit: int = 64 * 1024) -> str:
    from evaluator.errors import clean_text, truncate

    try:
        return truncate(clean_text(path.read_text(errors="replace")), limit)
    except OSError:
        return ""


def preimport(device: str) -> None:
    """Import what every evaluation needs before saying ready, so that a worker started ahead
    of its job (evaluator/runner/pool.py sets KB_WORKER_PREIMPORT=1) has paid for it; when
    started ahead, the extension and Triton machinery too, and the CUDA context. Nothing here
    runs candidate code."""
    import torch

    from evaluator import loading, timing  # noqa: F401

    if os.environ.get("KB_WORKER_PREIMPORT") != "1":
        return
    with contextlib.suppress(Exception):
        import torch.utils.cpp_extension
    if device != "cpu":
        with contextlib.suppress(Exception):
            import triton  # noqa: F401
        with contextlib.suppress(Exception):
            torch.empty(1, device=device).zero_()  # the CUDA context, ahead of the job
            torch.cuda.synchronize(device)


def _memory_note() -> dict[str, float]:
    """This process's device memory since the last note (GB), for the judge's record."""
    import torch

    try:
        note = {"peak_reserved": round(torch.cuda.max_memory_reserved() / 1e9, 2),
                "reserved": round(torch.cuda.memory_reserved() / 1e9, 2)}
        torch.cuda.reset_peak_memory_stats()
    except Exception:
        return {}
    return note


def main(argv: list[str] | None = None, *, worker_class: type[Worker] = Worker) -> int:
    """The worker's main loop, serving `worker_class` (probe.main passes ProbeWorker)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--fds", required=True, help="rfd,wfd,send_mem,recv_mem")
    parser.add_argument("--device", required=True)
    parser.add_argument("--limits", default="{}", help="rlimits (JSON), set before candidate code")
    args = parser.parse_args(argv)
    _die_with_parent()

    import json

    from evaluator.process import apply_limits

    applied = apply_limits(json.loads(args.limits))
    rfd, wfd, send_mem, recv_mem = (int(x) for x in args.fds.split(","))
    preimport(args.device)

    from evaluator.protocol import Channel, PeerClosed, ProtocolError

    channel = Channel(rfd, wfd, send_mem, recv_mem, device=args.device, role="worker")
    worker = worker_class(channel, args.device)
    channel.send({"type": "ready", "pid": outer_pid(), "limits": applied})
    while True:
        try:
            header, value = channel.recv()
        except PeerClosed:
            return 0
        except ProtocolError as exc:
            # The judge's message could not be read here (e.g. its GPU buffer could not be
            # mapped): say so rather than die, the judge decides.
            # Out of device memory while copying the message in is the device's state (beside
            # other evaluations, a run alone follows), not a fault of the harness.
            verdict = "out_of_memory" if "out of memory" in str(exc).lower() else "harness_error"
            channel.send({"ok": False, "verdict": verdict,
                          "error": f"the worker could not read the judge's message: {exc}"})
            continue
        if header.get("cmd") == "exit":
            # The candidate's atexit hooks and the interpreter's teardown are of no use to us.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        try:
            reply, out = worker.handle(header, value)
        except BaseException as exc:
            reply, out = {"ok": False, "verdict": "runtime_error", "error": repr(exc)[:2000],
                          "traceback": traceback.format_exc()[-4000:]}, None
        if args.device != "cpu" and isinstance(reply, dict):
            reply["memory_gb"] = _memory_note()
        try:
            channel.send(reply, out)
        except Exception as exc:
            channel.send({"ok": False, "verdict": "incorrect",
                          "error": f"the output cannot be sent to the judge: {exc}"[:2000]})
        del out, value
        if args.device != "cpu" and header.get("cmd") == "run":
            # A trial's inputs and outputs are copies, done with: hand their blocks back so
            # the judge's next allocation (and this process's timing sets) can use them.
            import torch

            torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
