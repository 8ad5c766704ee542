"""The probing worker: the worker the judge starts in the candidate's process, with the probes
of the exploit checks (what both sides compute alike, draws and output samples, is in
evaluator/samples.py).

The judge starts the worker through `main` here: the same worker as `evaluator.worker.base`
(its main loop, its commands), plus what the judge asks of it to catch exploits. Everything
measured in the candidate's process is evidence that the candidate could forge; the judge never
takes a value from here as a verdict. What decides is checked where the candidate cannot reach:
the outputs (compared in the judge against expected outputs the worker never sees, each timed
call's whole output sampled with the judge's own seed) and the time (the judge's own clock around
every timed call, judge/clock.py).

What the worker adds:
- around each timed call: whether the output is the input's memory or an earlier timed call's
  (the first calls' outputs are kept alive, so an honest allocator cannot hand them out again),
  and the candidate's threads still running; the kept outputs go back to the judge at the end,
  where work that finished after its call shows;
- before each correctness call, freed memory is filled with a pattern the judge picked, so an
  output that is memory the kernel never wrote shows it;
- output types (exact torch.Tensor), threads and child processes around calls, functions of
  torch, the timers and the harness compared with what they were before the candidate loaded,
  torch function/dispatch modes left on, and a profiled call (what share of the time the
  candidate's own kernels take).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import torch

from evaluator.loading import iter_tensors, synchronize
from evaluator.samples import KEEP_BYTES, KEEP_CALLS, describe, flatten_output, storage_ptr
from evaluator.worker.base import Worker
from evaluator.worker.launches import Launches

REFRESH_FAMILIES = ("draws", "none")


# --- the candidate's process -----------------------------------------------------------------

_MISSING = object()


def _library_dirs() -> tuple[str, ...]:
    dirs = [os.path.dirname(torch.__file__)]
    for name in ("triton", "numpy"):
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "__file__", None):
            dirs.append(os.path.dirname(mod.__file__))
    return tuple(d + os.sep for d in dirs)


def _is_callable_like(v: Any) -> bool:
    return callable(v) or isinstance(v, (types.ModuleType, type, classmethod, staticmethod,
                                         property))


class Snapshot:
    """Identities of torch's, the timers' and the harness's functions, taken before the candidate
    loads; `changes()` names those replaced since (patches made by torch or triton themselves,
    such as torch.compile wrapping Module.__init__, are recognised by where their code lives)."""

    SYS_NAMES = ("_getframe", "_current_frames", "settrace", "setprofile", "gettrace",
                 "getprofile", "getrefcount", "exit", "modules")
    OS_NAMES = ("write", "read", "_exit", "kill", "getpid", "fork", "listdir")
    THREADING_NAMES = ("enumerate", "main_thread", "active_count", "current_thread", "Thread")

    def __init__(self) -> None:
        import builtins
        import gc
        import statistics

        import torch.nn.functional as functional

        from evaluator import errors, ipc, loading, process, protocol, samples, timing
        from evaluator.worker import base as worker

        spaces: dict[str, Any] = {
            "torch": torch, "torch.Tensor": torch.Tensor,
            "torch._C.TensorBase": torch._C.TensorBase, "torch.nn.functional": functional,
            "torch.nn.Module": torch.nn.Module, "torch.cuda": torch.cuda,
            "torch.cuda.Event": torch.cuda.Event,
            "time": time, "statistics": statistics, "math": math, "gc": gc,
            "builtins": builtins,
            "evaluator.worker.base": worker, "evaluator.protocol": protocol,
            "evaluator.timing": timing, "evaluator.loading": loading,
            "evaluator.errors": errors, "evaluator.process": process,
            "evaluator.worker.probe": sys.modules[__name__], "evaluator.samples": samples,
            "evaluator.ipc": ipc,
            "Worker": worker.Worker, "Channel": protocol.Channel, "ProbeWorker": ProbeWorker,
            "Snapshot": Snapshot, "evaluator.timing.CallTimer": timing.CallTimer,
        }
        self.saved: dict[str, tuple[Any, dict[str, Any]]] = {}
        for label, obj in spaces.items():
            items = {k: v for k, v in vars(obj).items() if _is_callable_like(v)}
            self.saved[label] = (obj, items)
        # Modules whose other attributes change in normal life: only what the probes rely on.
        for label, module, names in (("sys", sys, self.SYS_NAMES), ("os", os, self.OS_NAMES),
                                     ("threading", threading, self.THREADING_NAMES)):
            self.saved[label] = (module, {k: getattr(module, k) for k in names
                                          if hasattr(module, k)})

    def changes(self) -> list[str]:
        libs = _library_dirs()
        out: list[str] = []
        for label, (obj, items) in self.saved.items():
            now = vars(obj)
            for key, old in items.items():
                new = now.get(key, _MISSING)
                if new is old:
                    continue
                if new is _MISSING:
                    out.append(f"{label}.{key} (deleted)")
                elif not _made_by_library(new, old, libs):
                    out.append(f"{label}.{key}")
        return out


def _made_by_library(new: Any, old: Any, libs: tuple[str, ...]) -> bool:
    obj = new
    for _ in range(8):
        if obj is old:
            return True
        func = getattr(obj, "__func__", obj)
        code = getattr(func, "__code__", None)
        if code is None or not code.co_filename.startswith(libs):
            return False
        obj = getattr(func, "__wrapped__", None)
        if obj is None:
            return True
    return False


def _tasks() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _children() -> list[int]:
    pids: list[int] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/children") as f:
                    pids.extend(int(p) for p in f.read().split())
            except OSError:
                continue
    except OSError:
        pass
    return sorted(set(pids))


def _poison(spec: Any, device: str) -> None:
    """Leave freed blocks holding the judge's pattern where the next outputs will be allocated."""
    if not isinstance(spec, dict):
        return
    pattern = int(spec.get("pattern", 0))
    sizes = [int(n) for n in spec.get("nbytes", []) if isinstance(n, int) and 0 < n < 1 << 40]
    blocks = []
    try:
        for nbytes in sizes:
            if device == "cpu":
                # malloc hands out recently freed chunks, but not always the same one; large
                # ones come fresh from mmap (zeros), where poisoning is pointless.
                count = 12 if nbytes < 16 << 20 else 0
            else:
                count = 3 if nbytes < 1 << 30 else 2  # the caching allocator reuses exact blocks
            for _ in range(count):
                blocks.append(torch.full(((nbytes + 3) // 4,), pattern, dtype=torch.int32,
                                         device=device))
        synchronize(device)
    except Exception:  # not enough memory to poison: the check is evidence, skip it
        pass
    while blocks:  # last allocated, first freed: the next allocations find the earliest first
        blocks.pop()


class OwnCodeProfile:
    """sys.setprofile hook: calls into the candidate's own compiled extensions (C functions whose
    module is a shared object outside the Python installation), Triton launches of kernels
    defined in the candidate's files and launches of its Helion, TileLang, CuTe DSL and cuTile
    kernels (whose device code is generated into another folder: launches.py); counts them and
    the host time spent inside."""

    def __init__(self, candidate_prefix: str):
        self.prefix = candidate_prefix
        self.calls = 0
        self.depth = 0
        self.started = 0.0
        self.host_s = 0.0
        self.frames: set[int] = set()
        self.names: set[str] = set()
        self.own_ids, self.own_modules = self._extension_functions()
        self.launches = Launches(candidate_prefix)

    def _extension_functions(self) -> tuple[set[int], set[str]]:
        """The functions of shared objects the candidate built: load_inline puts them under
        TORCH_EXTENSIONS_DIR (in the build folder) and does not list them in sys.modules, so
        they are found among live module objects."""
        import gc

        roots = [self.prefix, os.environ.get("TMPDIR") or ""]
        ext_dir = os.environ.get("TORCH_EXTENSIONS_DIR")
        if ext_dir:
            roots.append(str(Path(ext_dir).parent.parent))
        roots_t = tuple(r.rstrip(os.sep) + os.sep for r in roots if r)
        libs = _library_dirs()
        ids: set[int] = set()
        names: set[str] = set()
        for obj in gc.get_objects():
            if not isinstance(obj, types.ModuleType):
                continue
            path = str(getattr(obj, "__file__", "") or "")
            if path.endswith(".so") and path.startswith(roots_t) and not path.startswith(libs):
                names.add(obj.__name__)
                ids.update(id(v) for v in vars(obj).values() if callable(v))
        return ids, names

    def _own_c(self, func: Any) -> bool:
        # pybind11 functions carry their module's name (their __self__ is a capsule).
        return id(func) in self.own_ids or getattr(func, "__module__", None) in self.own_modules

    def _own_triton(self, frame: Any) -> bool:
        obj = frame.f_locals.get("self")
        for _ in range(6):
            if obj is None or not hasattr(obj, "fn"):
                break
            obj = obj.fn
        code = getattr(obj, "__code__", None)
        return bool(code and code.co_filename.startswith(self.prefix))

    def _enter(self, name: str) -> None:
        self.calls += 1
        self.names.add(name)
        if self.depth == 0:
            self.started = time.perf_counter()
        self.depth += 1

    def _leave(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.host_s += time.perf_counter() - self.started

    def hook(self, frame: Any, event: str, arg: Any) -> None:
        if event == "c_call":
            launched = self.launches.c_call(frame, arg)
            if launched is not None or self._own_c(arg):
                self.frames.add(id(arg))
                self._enter(launched or getattr(arg, "__name__", "?"))
        elif event in ("c_return", "c_exception"):
            if id(arg) in self.frames and self.depth:
                self._leave()
        elif event == "call":
            if frame.f_code.co_name == "run" and self._own_triton(frame):
                self.frames.add(id(frame))
                obj = frame.f_locals.get("self")
                self._enter(getattr(getattr(obj, "fn", None), "__name__", "triton kernel"))
            elif (launched := self.launches.call(frame)) is not None:
                self.frames.add(id(frame))
                self._enter(launched)
        elif event == "return" and id(frame) in self.frames:
            self.frames.discard(id(frame))
            if self.depth:
                self._leave()


class ProbeWorker(Worker):
    """The candidate worker with the judge's probes (see the module doc)."""

    def __init__(self, channel: Any, device: str):
        super().__init__(channel, device)
        # Before any candidate code: what torch, the timers and the harness look like.
        self.snapshot = Snapshot()
        self.start_threads = {t.ident for t in threading.enumerate()}
        self.candidate_prefix = str(Path.cwd())
        self.reference: types.ModuleType | None = None
        self.timed_calls = 0
        self.kept: dict[int, list[Any]] = {}  # the first timed calls' outputs, kept alive
        self.kept_bytes = 0
        self.previous_outputs: list[Any] = []
        self.extra_patches: list[str] = []

    def handle(self, header: dict, value: Any) -> tuple[dict, Any]:
        cmd = header.get("cmd")
        if cmd == "load":
            return self.probe_load(header, value)
        if cmd == "run":
            return self.probe_run(header, value)
        if cmd == "late":
            return self.late()
        if cmd == "profile":
            if isinstance(value, list):  # the judge's inputs for a profiled call made here
                self.sets = [value]
            return self.profile(header)
        if cmd == "profiler_warm":
            return self.profiler_warm(), None
        if cmd == "state":
            return {"ok": True, "probe": self.state()}, None
        return super().handle(header, value)

    # --- evidence ------------------------------------------------------------------------------
    def candidate_threads(self) -> list[str]:
        """Threads (other than the main one) whose stack runs code from the candidate's folder."""
        names = {t.ident: t.name for t in threading.enumerate()}
        main = threading.main_thread().ident
        found = []
        frames = sys._current_frames()
        # Neither the main thread nor this one. This thread's frame is this very frame: held
        # in a local here, it made a cycle (this frame -> itself) that kept the callers'
        # frames, and the trial's inputs and outputs with them, alive until the garbage
        # collector ran. On a problem of 6 GB a tensor, the worker held two more of them
        # after each trial and ran out of memory.
        frames.pop(main, None)
        frames.pop(threading.get_ident(), None)
        for ident, frame in frames.items():
            f = frame
            while f is not None:
                if f.f_code.co_filename.startswith(self.candidate_prefix):
                    found.append(names.get(ident, f"thread {ident}"))
                    break
                f = f.f_back
        return found

    def watch(self) -> dict[str, Any]:
        return {"candidate_threads": self.candidate_threads(), "tasks": _tasks()}

    def state(self) -> dict[str, Any]:
        modes = {}
        try:
            modes = {"torch_function": int(torch._C._len_torch_function_stack()),
                     "torch_dispatch": int(torch._C._len_torch_dispatch_stack())}
        except Exception:
            pass
        return {
            "patched": self.snapshot.changes() + self.extra_patches,
            "modes": modes,
            "trace_hooks": bool(sys.gettrace() or sys.getprofile()),
            "python_threads": [t.name for t in threading.enumerate()
                               if t.ident not in self.start_threads],
            "candidate_threads": self.candidate_threads(),
            "tasks": _tasks(),
            "children": _children(),
        }

    # --- commands ------------------------------------------------------------------------------
    def probe_load(self, header: dict, init_inputs: Any) -> tuple[dict, Any]:
        from evaluator import loading

        original = loading.build_model
        seen: dict[str, Any] = {}

        def recording_build_model(cls: Any, init: list, *args: Any, **kwargs: Any) -> Any:
            seen["init_inputs"] = describe(init)
            return original(cls, init, *args, **kwargs)

        loading.build_model = recording_build_model
        try:
            reply, value = super().load(header, init_inputs)
        finally:
            if loading.build_model is not recording_build_model:
                self.extra_patches.append("evaluator.loading.build_model")
            loading.build_model = original
        reply["probe"] = {"init_inputs": seen.get("init_inputs"), **self.state()}
        return reply, value

    def probe_run(self, header: dict, inputs: Any) -> tuple[dict, Any]:
        _poison(header.get("poison"), self.device)
        threads_before = {t.ident for t in threading.enumerate()}
        tasks_before, children_before = _tasks(), _children()
        reply, value = super().run(inputs)
        if not reply.get("ok"):
            return reply, value
        leaves = flatten_output(value)
        tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
        out_ptrs = {storage_ptr(t) for t in tensors} - {0}
        prev_ptrs = {storage_ptr(t) for t in self.previous_outputs} - {0}
        self.previous_outputs = tensors  # kept alive: an honest allocator cannot hand them out
        reply["probe"] = {
            "types": [type(t).__name__ for t in leaves],
            "exact_types": all(type(t) is torch.Tensor for t in tensors),
            "reused_previous_output": bool(out_ptrs & prev_ptrs),
            "new_threads": [t.name for t in threading.enumerate()
                            if t.ident not in threads_before],
            "candidate_threads": self.candidate_threads(),
            "tasks": [tasks_before, _tasks()],
            "new_children": sorted(set(_children()) - set(children_before)),
        }
        return reply, value

    def block_evidence(self, blocks: list, calls: list[dict], outputs: list[Any]) -> None:
        """What the judge cannot see from its side, for each call of a block once its last
        returned (all its inputs and outputs still alive, so an honest allocator cannot have
        handed one call's memory to another): whether an output is its inputs' memory or an
        earlier timed call's, and the candidate's threads still running once the block's calls
        returned (on the last call's facts). Evidence only; the outputs themselves go to the
        judge."""
        super().block_evidence(blocks, calls, outputs)
        # Without a model these were the judge's calibration, before any candidate code was
        # here: checked the same way, but not counted, and nothing kept.
        calibrating = self.model is None
        first = self.timed_calls
        self.timed_calls += 0 if calibrating else len(calls)
        for c, (inputs, reply, value) in enumerate(zip(blocks, calls, outputs, strict=True),
                                                   start=first):
            leaves = flatten_output(value)
            out_ptrs = {storage_ptr(t) for t in leaves if isinstance(t, torch.Tensor)} - {0}
            in_ptrs = {storage_ptr(t) for t in iter_tensors(list(inputs or []))} - {0}
            reply["alias_input"] = bool(in_ptrs & out_ptrs)
            for c_kept, kept in self.kept.items():
                if ({storage_ptr(t) for t in kept if isinstance(t, torch.Tensor)} - {0}
                        ) & out_ptrs:
                    reply["reused_from"] = c_kept
                    break
            if len(self.kept) < KEEP_CALLS and not calibrating:
                size = sum(t.numel() * t.element_size() for t in leaves
                           if isinstance(t, torch.Tensor))
                if self.kept_bytes + size <= KEEP_BYTES:
                    self.kept[c] = leaves
                    self.kept_bytes += size
        if calls:
            calls[-1].update(self.watch())

    def late(self) -> tuple[dict, Any]:
        """The kept outputs as they are now: work that finished after its call shows here."""
        synchronize(self.device)
        calls = sorted(self.kept)
        outputs = [tuple(self.kept[c]) for c in calls]
        self.kept.clear()
        return {"ok": True, "calls": calls, "made": self.timed_calls,
                "probe": self.state()}, outputs

    def profile(self, header: dict | None = None) -> tuple[dict, Any]:
        """One more call, on the inputs the judge sent for it, under the profilers (never timed):
        with this command, or, in a profiling process, ahead of the kernel's load with a
        "profile" command that only holds them (header "hold") until the calls come.

        On an H200 the first CUDA profiler session of a process takes 4 to 6.5 s to start (CUPTI),
        most of an already compiled kernel's evaluation; later ones take a millisecond. It is
        not started ahead in the spare worker: in a process that had run one session, a kernel
        of 16 to 25 us timed 30 to 40% slower than before it, and launches cost 10 to 19 us
        instead of 8 to 11, so it would skew the timing.

        Nothing of the reference comes here, nor is it profiled here: this process runs the
        candidate's code, which reads whatever the process holds, and a private problem's
        reference is not its submitter's to read (docs/security.md)."""
        header = header or {}
        if header.get("hold"):
            # A profiling process's set, before the kernel is here: the calls come next.
            held = self.sets[0] if self.sets else []
            return {"ok": True, "held": len(held)}, None
        if not self.sets or self.model is None:
            return {"ok": False, "verdict": "harness_error", "error": "nothing to profile"}, None
        inputs = self.sets[0]
        if header.get("warmup"):
            # A profiling process (workers.Profiler) has not called the kernel yet: its first
            # call (Triton's compile or autotuning, lazy set-up) stays out of the profile.
            try:
                with torch.no_grad():
                    self.model(*inputs)
                    synchronize(self.device)
            except BaseException as exc:
                return self._failure(exc, "runtime_error", "profile"), None
        own = OwnCodeProfile(self.candidate_prefix)
        kernels: dict[str, list[float]] = {}
        on_gpu = self.device != "cpu"
        try:
            if on_gpu:
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    host_s = self._profiled_call(own, inputs)
                kernels = _device_kernels(prof)
            else:
                host_s = self._profiled_call(own, inputs)
        except BaseException as exc:
            return self._failure(exc, "runtime_error", "profile"), None
        top = sorted(kernels.items(), key=lambda kv: -kv[1][0])[:60]
        reply = {"ok": True, "own_calls": own.calls, "own_names": sorted(own.names)[:20],
                 "own_host_ms": own.host_s * 1e3, "call_host_ms": host_s * 1e3,
                 "device_kernels": [[k, v[0]] for k, v in top],
                 "kernel_calls": {k: int(v[1]) for k, v in top},
                 "device_total_us": sum(v[0] for v in kernels.values())}
        return reply, None

    def profiler_warm(self) -> dict:
        """Start the device profiler once, on nothing of the candidate's: the first session of a
        process takes seconds (CUPTI), later ones a millisecond. Only in a profiling process,
        which is never timed: in one that had run a session, small kernels launched 30 to 40%
        slower."""
        t0 = time.perf_counter()
        try:
            if self.device != "cpu":
                from torch.profiler import ProfilerActivity, profile

                x = torch.ones(16, device=self.device)
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
                    x.add_(1)
                    synchronize(self.device)
        except BaseException as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
        return {"ok": True, "warm_s": time.perf_counter() - t0}

    def _profiled_call(self, own: OwnCodeProfile, inputs: Any) -> float:
        with torch.no_grad():
            t0 = time.perf_counter()
            sys.setprofile(own.hook)
            try:
                out = self.model(*inputs)
                synchronize(self.device)
            finally:
                sys.setprofile(None)
            elapsed = time.perf_counter() - t0
        del out
        return elapsed


def _device_kernels(prof: Any) -> dict[str, list[float]]:
    """{kernel name: [device us, calls]} from a finished torch.profiler session."""
    kernels: dict[str, list[float]] = {}
    for e in prof.key_averages():
        # Host-side ops carry their kernels' device time too: count the kernels only.
        if getattr(getattr(e, "device_type", None), "name", "") == "CPU":
            continue
        us = getattr(e, "self_device_time_total", None)
        if us is None:
            us = getattr(e, "self_cuda_time_total", 0.0)
        if us and us > 0:
            entry = kernels.setdefault(e.key, [0.0, 0])
            entry[0] += float(us)
            entry[1] += int(getattr(e, "count", 0) or 0)
    return kernels


def main(argv: list[str] | None = None) -> int:
    """The worker's own main loop, serving ProbeWorker instead of Worker."""
    from evaluator.worker import base as worker

    return worker.main(argv, worker_class=ProbeWorker)


if __name__ == "__main__":
    sys.exit(main())
