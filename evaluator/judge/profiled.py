"""The judge's untimed checks after timing: the profiled call (does the claimed backend do
the work, and where does the time go), the backend's evidence from outside the candidate's
process, the worker's final state and the speed of light.

The profiled call runs the candidate's code, in the timed worker or in a process of its own
(workers.Profiler): nothing of the reference goes there. The judge draws the call's inputs from
the problem's get_inputs() and hands them over as tensors, and the reference is not profiled
beside the kernel (docs/security.md: a private problem's reference is not its submitters' to
read, and a process that runs their code reads whatever it holds).

A mixin of Judge (judge.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from evaluator import backends
from evaluator.judge.workers import Verdict


class ProfiledPhases:
    def _profile_request(self) -> dict | None:
        """The profiled call's request, or None where nothing is profiled (PyTorch on a CPU).
        Its inputs travel as its value: nothing of the reference goes with it."""
        if self.job["backend"] == "torch" and self.device == "cpu":
            return None
        return {"cmd": "profile"}

    def _profile_inputs(self) -> list:
        """The profiled call's inputs: the judge's draw from the problem's get_inputs()."""
        from evaluator.loading import make_inputs

        return make_inputs(self.reference, self.result["seeds"]["profile"], self.device,
                           self.job["precision"])

    def _profiler_draw(self) -> dict:
        """The set the profiling process makes its calls on, handed to it now, before it loads
        the kernel (workers.Profiler.start_calls posts the load and the calls next): drawn here
        and sent as the value of a "profile" command that only holds it there (probe.py). The
        header of its calls then says so (returned here); no reference source enters it.

        Sent through the device's IPC box where the channel has one: through host memory a
        set of KernelBench's 19_ReLU (6.4 GB) took 16 s of a 27 s evaluation on an H200. That
        box holds a copy of the set until the profiling process is gone (its handle's end,
        before the timing where it runs beside the trials), then its memory is given back
        (Channel.free_boxes). Waited for only where the load's init inputs hold tensors, whose
        message rewrites the same memory: otherwise the set is read while the judge goes on,
        and its reply is collected with the others."""
        from evaluator.loading import PRECISION_DTYPES, cast_value, iter_tensors

        profiler = self.profiler
        if profiler is None or profiler.failure is not None:
            return {"held": False}
        inputs = self._profile_inputs()
        where = self.device if profiler.handle.channel.ipc else "cpu"
        sent = cast_value(inputs, where, PRECISION_DTYPES[self.job["precision"]])
        del inputs
        profiler.post({"cmd": "profile", "hold": True}, sent, what="inputs")
        del sent
        self._release_cached_memory()
        if next(iter_tensors(list(self.init_inputs or [])), None) is not None:
            profiler.collect(self.deadline)
        return {"held": profiler.failure is None}

    def _profile(self, request: dict | None, *, beside_trials: bool = False) -> None:
        """A separate, untimed call under the profilers: does the claimed backend do the work,
        and where does the time go (the per-kernel table, candidate and reference)? Its reply
        comes from the profiling process where there is one and it loaded the kernel; else the
        timed worker makes the call now, on its first timing set."""
        from evaluator.judge import exploits

        if request is None:
            return
        backend = backends.get(self.job["backend"])
        on_gpu = self.device != "cpu"
        t0 = time.perf_counter()
        reply = None
        if self.profiler is not None:
            replies = self.profiler.replies
            facts: dict[str, Any] = {"warm_s": replies.get("warm", {}).get("warm_s"),
                                     "beside_trials": beside_trials}
            if replies.get("load", {}).get("ok") and replies.get("profile", {}).get("ok"):
                reply = replies["profile"]
                facts["process"] = "profiler"
            else:  # the timed worker makes the call below, whose failure is the kernel's
                failed = replies.get("profile") if replies.get("load", {}).get("ok") else (
                    replies.get("load"))
                facts["error"] = str((failed or {}).get("error") or self.profiler.failure
                                     or "no reply")[:300]
            self.checks["profiler"] = facts
        if reply is None:
            # The timed worker holds no inputs of its own: the judge draws the call's set.
            inputs = self._profile_inputs()
            reply, _ = self.worker.request(request, inputs, deadline=self.deadline,
                                           phase="profiling")
            del inputs
        self.add_phase_time("profile", time.perf_counter() - t0)
        if not reply.get("ok"):
            if reply.get("verdict") != "harness_error":
                # The kernel's own failure in an ordinary call on the problem's inputs: an
                # honest kernel does not fail for being profiled, and one that did would leave
                # its backend unjudged (tests/exploits: fails_when_profiled).
                failure = self._failure(reply)
                raise Verdict(failure.verdict, "the profiled call (one untimed call under the "
                              f"profiler) failed: {failure.error}", **failure.fields)
            error = str(reply.get("error") or "")[:500]
            if backend.claims_kernels:
                # The worker could not make the call ("nothing to profile"): the kernel's own
                # process may have been tampered with (tests/exploits: unjudged_backend), and a
                # claim nobody checked never ranks.
                raise Verdict("harness_error", "the profiled call could not be made, so the "
                              f"claimed backend could not be checked: {error}")
            self.checks["backend"] = {"error": error}
            return
        kernels = (self.result.get("static_report") or {}).get("kernels") or {}
        names = [str(n) for n in (kernels.get("cuda") or []) + (kernels.get("triton") or [])]
        # Kernels a compiler names after the source's (Helion's `_helion_NAME`, TileLang's
        # `NAME_kernel`, CuTe DSL's `kernel_cutlass_NAME_...`, cuTile's `NAME_K...`).
        names += [n for b in backends.BACKENDS.values() if b.renames_kernels
                  for n in b.device_kernel_names(kernels)]
        if on_gpu:  # the kernel's side alone: the judge asked for no reference's profile
            self.result["profile"] = exploits.kernel_profile(
                {k: v for k, v in reply.items() if k != "reference"}, names)
        if not backend.claims_kernels:
            return
        report = exploits.backend_share(reply, backend.name, names, on_gpu)
        if not report.get("not_used"):
            report["evidence"] = self._backend_evidence(reply, kernels)
            report["not_used"] = not report["evidence"].get("ok", True)
        self.checks["backend"] = report
        if report.get("not_used"):
            self.flag("backend_not_used", {"share": report.get("share"),
                                           "own_calls": report.get("own_calls"),
                                           "evidence": (report.get("evidence") or {}
                                                        ).get("missing")})
        elif report.get("minor"):  # a note (flags.py), not an exploit
            self.flag(exploits.BACKEND_SHARE_SMALL, {"share": report.get("share"),
                                                     "own_calls": report.get("own_calls")})

    def _backend_evidence(self, reply: dict, kernels: dict) -> dict[str, Any]:
        """What the profiled call reported, held to what the judge sees from outside the
        candidate's process (evidence.py): the timed worker's, which is still running and
        loaded the same build as the profiling worker, if one made the call."""

        from evaluator.judge import evidence

        backend, on_gpu = backends.get(self.job["backend"]), self.device != "cpu"
        handle = self.worker
        build = handle.host_build_dir or self.job.get("build_dir") or str(
            self.workdir / "worker" / "build")
        if not build:
            return {"ok": True, "skipped": "no build folder the judge can read"}
        reported = [str(n) for n in reply.get("own_names") or [] if isinstance(n, str)][:40]
        if on_gpu:  # the device kernels the profiler matched to the source's names
            own = (self.result.get("profile") or {}).get("candidate", {}).get("kernels") or []
            reported += [str(k["name"]) for k in own if k.get("own")][:40]
        try:
            if backend.evidence == "extension":
                if on_gpu:  # a CUDA kernel's name is in its extension (symbols, fatbin)
                    reported = [n for n in (kernels.get("cuda") or [])
                                if any(n in r for r in reported)] or reported
                return evidence.extension_evidence(
                    reported, worker_pid=handle.proc.pid, build_root=Path(build),
                    sandbox_root=handle.build_dir)
            # The source's kernels in its language (@triton.jit, Helion's, TileLang's...), and
            # those the report names (a device kernel's name holds its source kernel's).
            source = backend.kernel_names(kernels)
            named = [n for n in source if any(n in r for r in reported)] or reported
            if backend.evidence == "triton":
                return evidence.triton_evidence(
                    named, source_kernels=source, build_root=Path(build),
                    on_gpu=on_gpu, prefix=backend.kernel_prefix)
            if backend.evidence == "cache":  # a compiler's own cache (TileLang, CuTe, cuTile)
                return evidence.cache_evidence(
                    named, source_kernels=source, build_root=Path(build),
                    device_names={n: backend.device_kernel_name(n).removesuffix(
                        backends.MANGLED) for n in source},
                    folder=str(backend.cache_folder), on_gpu=on_gpu)
        except Exception as exc:  # the evidence could not be read: say so, decide nothing
            return {"ok": True, "error": f"{type(exc).__name__}: {exc}"[:300]}
        return {"ok": True}

    def _final_state(self) -> None:
        from evaluator.judge import exploits

        reply, _ = self.worker.request({"cmd": "state"}, deadline=self.deadline, phase="checks")
        state = reply.get("probe") if isinstance(reply.get("probe"), dict) else {}
        self.checks["final_state"] = {k: state.get(k) for k in ("patched", "modes",
                                                                "python_threads", "tasks")}
        self.flag_all(*exploits.state_flags(state))

    def _speed_of_light(self) -> None:
        from evaluator.judge.speed_of_light import assess

        job = self.job
        cand = self.result.get("candidate") or {}
        env = self.result.get("environment") or {}
        report = assess(
            self.checks.get("cost"), cand.get("median_ms"), precision=job["precision"],
            peak_bandwidth_gbs=job.get("peak_bandwidth_gbs"), peak_tflops=job.get("peak_tflops"),
            l2_bytes=int(env.get("l2_bytes") or 0),
            l2_flushed=self.device == "cpu" or bool(job["timing"].get("flush_l2", True)),
        )
        self.checks["speed_of_light"] = report
        if report.get("faster_than_light"):
            self.flag("faster_than_light", {"candidate_ms": report.get("candidate_ms"),
                                            "memory_bound_ms": report.get("memory_bound_ms")})
