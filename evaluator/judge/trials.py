"""The judge's correctness phase: the checks prepared ahead, each trial's inputs sent and
its outputs compared (and diagnosed when wrong), and the device memory noted between them.

A mixin of Judge (judge.py).
"""

from __future__ import annotations

import time
from typing import Any

from evaluator.errors import short_message
from evaluator.judge.workers import Verdict, reported_seconds


def derive_check_seed(seed: int, index: int) -> int:
    from evaluator.loading import derive_seed

    return derive_seed(seed, "check", index)


class CorrectnessPhases:
    def _trial(self, k: int, reference: Any, ref_model: Any, pattern: Any,
               left_running: Any, earlier_expected: list) -> None:
        """Correctness trial k: the candidate's call, then the reference's, then the check."""
        import torch

        from evaluator.judge import exploits
        from evaluator.loading import make_inputs

        job, device, precision = self.job, self.device, self.job["precision"]
        n, seeds = job["n_trials"], self.result["seeds"]
        self.events.emit({"type": "trial", "k": k, "n": n})
        t0 = time.perf_counter()
        inputs = make_inputs(reference, seeds["trials"][k - 1], device, precision)
        self.add_phase_time("inputs", time.perf_counter() - t0)
        t0 = time.perf_counter()
        header = {"cmd": "run", "k": k,
                  "poison": {"pattern": pattern, "nbytes": self.checks.get("output_nbytes",
                                                                           [])}}
        reply, outputs = self.worker.request(header, inputs, deadline=self.deadline,
                                             phase=f"trial {k}")
        self._note_memory(f"trial {k}", reply.get("memory_gb"))
        if not reply.get("ok"):
            self.add_phase_time("correctness", time.perf_counter() - t0)
            self.result["trials"].append({"k": k, "passed": False,
                                          "error": reply.get("error", "")})
            raise self._failure(reply)
        jit_s = self._jit_compile_time(k, reply, time.perf_counter() - t0)
        worker_flags = [f for f in reply.get("flags", []) if isinstance(f, str)][:10]
        probe = reply.get("probe") if isinstance(reply.get("probe"), dict) else {}
        flags, details = exploits.trial_flags(probe)
        more, more_details = left_running.check(probe, k)
        flags += [f for f in more if f not in flags]
        details.update(more_details)
        # Memory the kernel never wrote shows the judge's pattern. Mostly unwritten: the
        # output is freed memory handed back (an exploit); a few elements: a bug, which
        # the comparison below reports as incorrect.
        stale = exploits.count_poison(outputs, pattern)
        if stale and 2 * stale >= exploits.checked_elements(outputs):
            flags.append("stale_memory_output")
            details["stale_elements"] = stale
        # Expected outputs only now, after the candidate has produced its own.
        with torch.no_grad():
            expected = ref_model(*inputs)
        trial = self._compare(k, expected, outputs)
        if stale:
            trial["unwritten_elements"] = stale
        if trial["passed"] and k == 1 and precision == "fp32":
            evidence = exploits.precision_evidence(ref_model, inputs, expected, outputs)
            self.checks["precision"] = evidence
            if evidence.get("downgrade"):
                flags.append("precision_downgrade")
        if not trial["passed"]:
            flags += self._name_a_wrong_output(reference, ref_model, earlier_expected,
                                               outputs)
            trial["diagnosis"] = self._diagnose(ref_model, inputs, expected, outputs)
        trial["flags"] = worker_flags + [f for f in flags if f not in worker_flags]
        self.result["trials"].append(trial)
        self.events.emit({"type": "trial_result", "k": k, "n": n, "passed": trial["passed"],
                          "max_abs_diff": trial["max_abs_diff"]})
        if exploits.nbytes(earlier_expected, expected) <= exploits.KEEP_EXPECTED_BYTES:
            earlier_expected.append(expected)  # a cache keyed on addresses hits later
        del expected, outputs, inputs
        self._release_cached_memory()
        self.add_phase_time("correctness", time.perf_counter() - t0 - jit_s)
        for f in worker_flags:
            self.flag(f)
        self.flag_all(flags, details)
        self.reject_if_needed(trial["flags"], f"trial {k}")
        if not trial["passed"]:
            raise Verdict("incorrect", f"trial {k}: {trial.get('reason', 'mismatch')}")

    def _jit_compile_time(self, k: int, reply: dict, wall: float) -> float:
        """A JIT language compiles on the first call: the worker says how long that call took
        where its compiler's cache grew. It goes to the compile phase, not correctness, within
        what the judge itself waited for the call (the worker's word bounds nothing else)."""
        if k != 1 or "jit_s" not in reply:
            return 0.0
        jit = reported_seconds(reply["jit_s"], wall)
        self.add_phase_time("compile", jit)
        self.result.setdefault("compile", {})["jit_s"] = round(jit, 3)
        return jit

    def _note_memory(self, where: str, worker: Any = None) -> None:
        """Device memory at a step, on both sides (GB): what to look at when an evaluation of
        a problem with large tensors ends out_of_memory. The peaks start again after each."""
        if self.device == "cpu":
            return
        import torch

        free, total = torch.cuda.mem_get_info()
        note = {"judge_peak_reserved": round(torch.cuda.max_memory_reserved() / 1e9, 2),
                "free": round(free / 1e9, 2), "total": round(total / 1e9, 2)}
        if isinstance(worker, dict):
            note["worker"] = {k: v for k, v in worker.items()
                              if isinstance(k, str) and isinstance(v, (int, float))}
        self.checks.setdefault("memory_gb", {})[where] = note
        torch.cuda.reset_peak_memory_stats()

    def _release_cached_memory(self) -> None:
        """Hand the blocks torch keeps cached back to the device. The worker is another process
        with its own cache: on a problem of several GB a tensor, the two caches together once
        held all of an H200's memory, and the worker's next allocation failed."""
        if self.device != "cpu":
            import torch

            torch.cuda.empty_cache()

    # --- exploit checks ------------------------------------------------------------------------
    def _prepare_checks(self, reference: Any, ref_model: Any, seeds: dict) -> None:
        """While the worker compiles: the reference on the judge's own probe inputs (never sent
        anywhere) gives the output sizes (for the freed-memory pattern), the way that
        refreshes timing inputs, and the bytes and FLOPs of the problem."""
        from evaluator.judge import exploits
        from evaluator.judge.speed_of_light import problem_cost
        from evaluator.loading import iter_tensors, make_inputs

        job = self.job
        try:
            inputs = make_inputs(reference, seeds["probe"], self.device, job["precision"])
            cost = problem_cost(ref_model, inputs, count_flops=bool(job.get("peak_tflops")))
            self.checks["cost"] = cost
            import torch

            with torch.no_grad():
                out = ref_model(*inputs)
            self.checks["output_nbytes"] = [t.numel() * t.element_size()
                                            for t in iter_tensors(out)]
            del out
            self._cap_replies(inputs)
            self.checks["refresh"] = exploits.refresh_family(inputs)
        except Exception as exc:  # the problem's own quirks; the checks then do less
            self.checks.setdefault("errors", []).append(f"prepare: {short_message(exc)}")
            self.checks.setdefault("refresh", "none")

    def _cap_replies(self, inputs: list) -> None:
        """What the judge accepts in one reply of the worker, from the reference's own sizes:
        an output (a correctness or timed call), the first timed outputs kept (probe.KEEP_BYTES)
        beside one, or a copy of an input (the calibration), with room to spare; a reply that
        declares more is refused before anything is allocated (protocol.Channel)."""
        from evaluator.loading import iter_tensors
        from evaluator.samples import KEEP_BYTES

        out = sum(self.checks.get("output_nbytes") or [])
        largest_input = max((t.numel() * t.element_size() for t in iter_tensors(inputs)),
                            default=0)
        cap = max(2 * out, KEEP_BYTES + out, largest_input) + (16 << 20)
        channel = self.worker.channel if self.worker is not None else None
        if channel is not None and getattr(channel, "max_tensor_bytes", None):
            channel.max_tensor_bytes = min(channel.max_tensor_bytes, cap)
        self.checks["reply_max_bytes"] = cap

    def _name_a_wrong_output(self, reference: Any, ref_model: Any, earlier_expected: list,
                             outputs: Any) -> list[str]:
        """A wrong output that is the right answer to other inputs names an exploit."""
        from evaluator.judge import exploits

        job = self.job
        for expected in reversed(earlier_expected):
            if exploits.matches(expected, outputs, job["atol"], job["rtol"], self.device):
                return ["result_caching"]
        seed = exploits.seed_replay(reference, ref_model, outputs, device=self.device,
                                    precision=job["precision"], atol=job["atol"],
                                    rtol=job["rtol"])
        if seed is not None:
            self.checks["seed_replay"] = seed
            return ["seed_replay"]
        return []

    def _compare(self, k: int, expected: Any, outputs: Any) -> dict:
        from evaluator.judge.compare import compare_outputs

        res = compare_outputs(expected, outputs, atol=self.job["atol"], rtol=self.job["rtol"],
                              expected_device=self.device)
        trial = {"k": k, **res}
        return trial

    def _diagnose(self, ref_model: Any, inputs: list, expected: Any, outputs: Any) -> dict:
        """What the author of a failed trial can act on (diagnose.py); the reference is
        recomputed in lower precision for it, so only here. Never changes the verdict."""
        from evaluator.judge import diagnose

        t0 = time.perf_counter()
        try:
            return diagnose.trial_diagnosis(ref_model, inputs, expected, outputs,
                                            atol=self.job["atol"], rtol=self.job["rtol"],
                                            deadline=self.deadline)
        except Exception as exc:  # a diagnosis is a courtesy
            return {"error": f"{type(exc).__name__}: {exc}"[:300]}
        finally:
            self.add_phase_time("diagnosis", time.perf_counter() - t0)

    def _failure(self, reply: dict) -> Verdict:
        verdict = reply.get("verdict")
        if verdict not in (
            "compile_error", "runtime_error", "out_of_memory", "incorrect", "harness_error"
        ):
            verdict = "runtime_error"
        return Verdict(verdict, str(reply.get("error") or "")[:4000],
                       traceback=str(reply.get("traceback") or "")[:16000],
                       compile_log=str(reply.get("compile_log") or "")[:200000] or None)
