"""The judge's timed phase: the calibration, the timed calls of candidate and reference
through the judge's own loop and clock (clock.py), and the check of every timed output.

A mixin of Judge (judge.py), which holds the state these methods read: the worker, the gate,
the result and the reference's timer.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Iterator
from typing import Any

from evaluator.judge.trials import derive_check_seed
from evaluator.judge.workers import Verdict

_TIMING_FACTS = ("n", "stopped", "rel_err", "input_sets", "flushes", "block")


# Times both sides are timed when the judge's clock does not confirm the worker's report (a
# host busy for a moment, or a report it cannot vouch for).
TIMING_ATTEMPTS = 3

# While the reference is timed the worker has nothing to do: it waits for the next request. CPU
# its process tree uses then is work the kernel left running beside the calls (a thread started
# at import, whatever code it runs, which no frame or name gives away); on a CPU host it takes
# cores from the reference and so inflates the speedup. An honest worker used none there (the
# scheduler's count, to the nanosecond: 0.0 s in windows of 11 to 13 ms on the CPU, where a
# kernel's thread started at import used all of one); allowed, for a thread pool spinning down
# after the candidate's last call: this share of the window, plus the slack.
IDLE_WORKER_CPU_SHARE = 0.2
IDLE_WORKER_CPU_SLACK_S = 0.005


def ranked_samples(samples: list[float], ranked_ms: float) -> list[float]:
    """The worker's figures (a block's mean call each) scaled so that their median is the
    ranked one (the judge's figure where the worker's is outside its resolution), or that
    figure alone where there are none."""
    reported = statistics.median(samples) if samples else 0.0
    if reported <= 0:
        return [ranked_ms]
    if math.isclose(reported, ranked_ms, rel_tol=1e-12):
        return list(samples)
    scale = ranked_ms / reported
    return [s * scale for s in samples]


def _summary(stats: dict | None) -> dict | None:
    from evaluator.timing import summarize

    return summarize(stats["samples_ms"]) if stats else None


def _starts(attempts: list[dict]) -> list[int]:
    """Where each attempt's candidate records begin in the list of all of them."""
    starts, total = [], 0
    for a in attempts:
        starts.append(total)
        total += len(a["cand"].records)
    return starts


def _timed_summaries(records: list[dict], outputs: list[Any],
                     details: dict[str, Any]) -> dict[tuple[int, int], tuple[list[dict], Any]]:
    """The wrong timed calls' summaries (their outputs, sampled by the judge), by (set, use)."""
    wrong = {tuple(w) for w in details.get("wrong_calls") or []}
    return {(rec["j"], rec["k"]): (rec.get("outputs") or [], out)
            for rec, out in zip(records, outputs, strict=False)
            if (rec.get("j"), rec.get("k")) in wrong}


def _late_samples(reply: dict, kept: Any, summarize: Any) -> dict[int, Any]:
    """The kept outputs, sampled now by the judge (untrusted: checked for shape)."""
    calls = reply.get("calls")
    late: dict[int, Any] = {}
    if not isinstance(calls, list) or not isinstance(kept, list):
        return late
    for c, out in zip(calls, kept, strict=False):
        if isinstance(c, int) and not isinstance(c, bool):
            try:
                late[c] = summarize(out)[1]
            except Exception:  # a malformed kept output is evidence of nothing
                continue
    return late


def _median_per_flush(stats: dict) -> float | None:
    flushes = stats.get("flushes")
    if not isinstance(flushes, int) or flushes < 1 or not stats.get("prefix_ms"):
        return None
    return statistics.median(stats["prefix_ms"]) / flushes


class TimedPhases:
    # --- timing --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _timing_threads(self) -> Iterator[None]:
        """On a CPU runner, the judge's own side of every timed or calibrating call (the
        reference, the channel's copies mirrored) on the intra-op threads the worker's calls
        get (timing.py says why). With the default two on a busy 2-core host, each of the
        judge's copies waited on a thread the host had set aside: the calibration's local path
        took 30 ms a call against 0.7 ms on one thread, and honest results were left
        unconfirmed."""
        import torch

        threads = self.job["timing"].get("cpu_threads", 1)
        if self.device != "cpu" or not isinstance(threads, int) or threads <= 0:
            yield
            return
        from evaluator.environment import note

        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        note("timing_threads", threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def _timed_call_header(self) -> dict[str, Any]:
        cfg = self.job["timing"]
        return {"cmd": "block", "flush_l2": bool(cfg.get("flush_l2", True)),
                "cpu_threads": cfg.get("cpu_threads", 1)}

    @contextlib.contextmanager
    def _reply_cap(self, calls: int) -> Iterator[None]:
        """What the judge accepts in the reply to a block: a call's cap (trials._cap_replies,
        from the reference's own sizes) for each of its calls."""
        channel = self.worker.channel
        cap = self.checks.get("reply_max_bytes")
        if not isinstance(cap, int) or not getattr(channel, "max_tensor_bytes", None):
            yield
            return
        channel.max_tensor_bytes = cap * max(1, calls)
        try:
            yield
        finally:
            channel.max_tensor_bytes = cap

    def _block_bytes(self) -> int:
        """What a timed block's inputs and outputs may hold together (clock.block_size): on the
        CPU they travel in the channel's memfds, which the largest file the judge's and the
        worker's processes may write (RLIMIT_FSIZE) binds, so half of the smaller of those."""
        import resource

        from evaluator.judge.clock import BLOCK_BYTES, BLOCK_DEVICE_SHARE
        from evaluator.process import resolve_file_size_bytes

        if self.device != "cpu":
            import torch

            total = torch.cuda.get_device_properties(torch.device(self.device)).total_memory
            return int(BLOCK_DEVICE_SHARE * total)
        limits = [BLOCK_BYTES]
        own = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        worker = resolve_file_size_bytes(self.job.get("limits") or {})
        limits += [x // 2 for x in (own, worker) if x not in (None, resource.RLIM_INFINITY)]
        return max(1, min(limits))

    def _calibrate(self, reference: Any, seeds: dict) -> None:
        """What the path through the worker costs the judge's clock beyond the same call made
        here, measured before the candidate's code is loaded (clock.round_trip), on a set
        of the problem's inputs drawn for it alone."""
        from evaluator.judge.clock import Echo, LocalPath, round_trip
        from evaluator.loading import make_inputs
        from evaluator.timing import CallTimer, calibration_call

        self.ref_timer = CallTimer(self.device,
                                   flush_l2=bool(self.job["timing"].get("flush_l2", True)))
        self.local_path = LocalPath(self.ref_timer)
        from evaluator.samples import summarize_output

        sample_seed = derive_check_seed(seeds["checks"], 4)

        def draw(i: int) -> list:  # sets for the calibration alone, never timed
            return make_inputs(reference, derive_check_seed(seeds["checks"], 100 + i),
                               self.device, self.job["precision"])

        header = self._timed_call_header()

        def worker_call(blocks: list, flushes: int) -> tuple[list[dict], Any]:
            reply, outs = self.worker.request({**header, "flushes": flushes}, blocks,
                                              deadline=self.deadline, phase="start")
            if not reply.get("ok") or not isinstance(reply.get("calls"), list):
                raise Verdict("harness_error", "the worker failed the judge's calibration "
                              f"call: {str(reply.get('error') or '')[:300]}")
            return reply["calls"], outs

        def local_call(blocks: list, flushes: int) -> tuple[list[dict], Any]:
            return self.local_path.call(calibration_call, blocks, flushes)

        # A first message without tensors: it carries the channel's CUDA IPC probe, whose answer
        # is in before any tensor travels (a message sent while the probe is out goes through
        # host memory: seconds for a problem of several GB a tensor).
        self.worker.request({"cmd": "ping"}, deadline=self.deadline, phase="start")
        self.echo = Echo()
        with self._timing_threads():
            self.round_trip = round_trip(
                worker_call, local_call, draw, summarize=lambda out: summarize_output(
                    out, sample_seed), sync=self.ref_timer.sync, echo=self.echo,
                cap_bytes=self._block_bytes())
        self.checks["round_trip"] = self.round_trip

    def _time_candidate_and_reference(self, reference: Any, ref_model: Any,
                                      seeds: dict) -> list[str]:
        """Times both sides call by call through the judge's loop (clock.py): every call's
        inputs drawn here and sent with it, the whole output back inside the judge's interval
        and checked against the reference on the same draw; returns the rejecting flags it
        raised."""
        draw, summarize = self._timed_draws(reference, seeds)
        attempts, records, outputs, late_reply, kept = self._timed_attempts(
            ref_model, draw, summarize, n_sets=len(seeds["timing"]))
        self._note_memory("timing", late_reply.get("memory_gb"))
        self._record_timing(attempts, n_sets=len(seeds["timing"]))
        return self._verify_timed_outputs(ref_model, draw, summarize, attempts, records,
                                          outputs, late_reply, kept)

    def _timed_draws(self, reference: Any, seeds: dict) -> tuple[Any, Any]:
        """Every timed call's inputs, (set j, call k) -> tensors, all drawn by the judge: the
        first call of each set from the timing seeds, later ones from a seed the worker never
        holds; and how a timed output is summarised (sampled) for the later check."""
        from evaluator.loading import make_inputs
        from evaluator.samples import draw_inputs

        device, precision = self.device, self.job["precision"]
        n_sets = len(seeds["timing"])
        later = draw_inputs(reference, derive_check_seed(seeds["checks"], 1), device, precision)

        def draw(j: int, k: int) -> list:
            if k == 0 and j < n_sets:
                return make_inputs(reference, seeds["timing"][j], device, precision)
            return later(j, k)

        return draw, self._timed_summary

    def _timed_summary(self, out: Any) -> tuple[list[dict], Any]:
        """How a timed output is summarised (sampled) for the later check; the trials' answers
        are summarised the same way, to name a timed call that returned one of them."""
        from evaluator.samples import summarize_output

        return summarize_output(out, derive_check_seed(self.seeds["checks"], 2))

    def _timed_attempts(self, ref_model: Any, draw: Any, summarize: Any, *,
                        n_sets: int) -> tuple[list[dict], list[dict], list[Any], dict, Any]:
        """Candidate then reference, with the device to this evaluation alone (gate.py), until
        the judge's clock vouches for the candidate's samples or TIMING_ATTEMPTS are spent; what
        the driver saw of each window is kept with it (provenance.py). Returns the attempts, the
        candidate's records and outputs, and the worker's reply to "late" (what it kept) with
        its values."""
        from evaluator.judge.clock import MAX_BLOCK, TimingLoop, vouch
        from evaluator.judge.provenance import DeviceWatch
        from evaluator.timing import flush_ms

        on_gpu = self.device != "cpu"
        ref_timer = self.ref_timer
        one_flush = flush_ms(ref_timer.flush, self.device) if ref_timer.flush is not None else 0.0
        def ref_call(blocks: list, flushes: int) -> tuple[list[dict], Any]:
            return self.local_path.call(ref_model, blocks, flushes)

        rtt = self.round_trip
        # The channel's cost per hand-over, as the judge's clock sees it (the block's size is
        # chosen from it and the warm-up's calls).
        handover = float(rtt.get("handover_ms", rtt.get("median_ms")) or 0.0)

        # Blocks of several calls only where the calibration could tell the path's cost per
        # call from its cost per hand-over (it made blocks of several calls: they fitted).
        max_block = MAX_BLOCK if int(rtt.get("block") or 1) > 1 else 1

        def loop(offset: int) -> TimingLoop:
            return TimingLoop(lambda j, k: draw(j + offset, k), n_sets, summarize,
                              sync=ref_timer.sync, one_flush_ms=one_flush, on_gpu=on_gpu,
                              echo=self.echo, handover_ms=max(0.0, handover),
                              cap_bytes=self._block_bytes(), max_block=max_block,
                              **dict(self.job["timing"]))

        attempts: list[dict] = []
        records: list[dict] = []
        outputs: list[Any] = []
        beside = {"cpu_s": 0.0, "wall_s": 0.0}  # the worker, while the reference is timed
        watch = DeviceWatch(self.device)  # the driver's view of each window (provenance.py)
        with self.gate.exclusive(), self._timing_threads():
            self.result["timing_window"] = [time.time(), None]  # shown beside others' steps
            try:
                for attempt in range(TIMING_ATTEMPTS):
                    offset = 2 * attempt * n_sets
                    cand_loop, ref_loop = loop(offset), loop(offset)
                    watch.open()
                    cand = cand_loop.run(self._candidate_block)
                    cpu_before, t_ref = self._worker_cpu_s(), time.perf_counter()
                    # The same method for the reference: its calls in blocks of the same size.
                    ref = ref_loop.run(ref_call, block=cand.block)
                    beside["wall_s"] += time.perf_counter() - t_ref
                    beside["cpu_s"] += self._worker_cpu_s() - cpu_before
                    seen = watch.close()
                    report = vouch(cand, ref, self.round_trip, one_flush, on_gpu=on_gpu)
                    attempts.append({"cand": cand, "ref": ref, "report": report, "seen": seen,
                                     "ref_records": ref.records, "ref_outputs": ref.outputs,
                                     "offset": offset})
                    records += cand.records
                    outputs += cand.outputs
                    if report["confirmed"]:
                        break
            finally:
                self.result["timing_window"][1] = time.time()
            reply, kept = self.worker.request({"cmd": "late"}, deadline=self.deadline,
                                              phase="timing")
        self._name_work_beside_the_reference(beside)
        return attempts, records, outputs, reply, kept

    def _candidate_block(self, blocks: list, flushes: int) -> tuple[list[dict], Any]:
        """A block of timed calls through the worker: each call's facts, and the outputs."""
        with self._reply_cap(len(blocks)):
            reply, outs = self.worker.request(
                {**self._timed_call_header(), "flushes": flushes}, blocks,
                deadline=self.deadline, phase="timing")
        if not reply.get("ok"):
            raise self._failure(reply)
        calls = reply.get("calls")
        if not isinstance(calls, list) or not isinstance(outs, (list, tuple)) or (
                len(calls) != len(blocks) or len(outs) != len(blocks)):
            self.flag("timing_tampered", {"block": len(blocks)})
            raise Verdict("rejected", f"the worker answered a block of {len(blocks)} timed "
                                      "calls with another number of replies")
        return calls, outs

    def _worker_cpu_s(self) -> float:
        """The CPU seconds the worker's whole process tree has used so far (evidence.py)."""
        from evaluator.judge.evidence import cpu_seconds, process_tree

        root = self.worker.proc.pid
        return cpu_seconds([root, *process_tree(root)])

    def _name_work_beside_the_reference(self, beside: dict[str, float]) -> None:
        """Kept with the timing, and flagged where the idle worker kept a core busy."""
        self.worker_beside_reference = {k: round(v, 4) for k, v in beside.items()}
        if beside["cpu_s"] > IDLE_WORKER_CPU_SHARE * beside["wall_s"] + IDLE_WORKER_CPU_SLACK_S:
            self.flag("background_thread", {"busy_while_reference_timed": {
                **self.worker_beside_reference,
                "what": "the worker's processes used this CPU time while the reference was "
                        "timed and the worker had nothing to do"}})

    def _record_timing(self, attempts: list[dict], *, n_sets: int) -> None:
        """The last attempt's medians, speedup and the clock's report on the result; the
        samples unconfirmed by the judge's clock flagged."""
        last = attempts[-1]
        cand, ref, report = last["cand"], last["ref"], last["report"]
        cand_stats = {**cand.stats(), "input_sets": n_sets}
        ref_stats = {**ref.stats(), "input_sets": n_sets}
        # What ranks is the judge's figure (clock.vouch): the worker's samples, held within the
        # judge's resolution of its own measurement (scaled to the ranked median, so that their
        # spread still gives the interval).
        cand_stats["samples_ms"] = ranked_samples(cand.block_means(),
                                                  report["ranked_median_ms"])
        self.result["candidate"] = _summary(cand_stats)
        # The reference by the same statistic (its blocks' means, the judge's own figures).
        self.result["reference"] = _summary({**ref_stats, "samples_ms": ref.block_means()})
        if self.result["candidate"] and self.result["reference"]:
            c = self.result["candidate"]["median_ms"]
            r = self.result["reference"]["median_ms"]
            self.result["speedup"] = r / c if c > 0 else None
        report["attempts"] = len(attempts)
        if len(attempts) > 1:
            report["first_attempt"] = {k: attempts[0]["report"].get(k) for k in (
                "judge_median_ms", "reported_median_ms", "unexplained_ms", "expected_ms",
                "tolerance_ms")}
        self.result["timing_detail"] = {
            "candidate": {k: cand_stats[k] for k in _TIMING_FACTS},
            "reference": {k: ref_stats[k] for k in _TIMING_FACTS},
            "judge_clock": report,
            "cross_check": self._stream_check({**cand_stats, "samples_ms": cand.samples},
                                              ref_stats),
            # Other evaluations' candidate processes stopped for the window (gate.py).
            "neighbours_stopped": self.gate.frozen[-1] if self.gate.frozen else None,
            # The driver's view of the window: clocks, power, other processes (provenance.py).
            "device_seen": last["seen"],
            # What the worker's processes used of the CPU while only the reference ran.
            "worker_beside_reference": self.worker_beside_reference,
        }
        if not report["confirmed"]:
            from evaluator.flags import TIMING_UNCONFIRMED

            self.flag(TIMING_UNCONFIRMED, {k: report.get(k) for k in (
                "reason", "judge_median_ms", "reported_median_ms", "vouched_median_ms")})

    def _verify_timed_outputs(self, ref_model: Any, draw: Any, summarize: Any,
                              attempts: list[dict], records: list[dict], outputs: list[Any],
                              reply: dict, kept: Any) -> list[str]:
        """Every timed call's output, against the reference on the same (drawn) inputs; the
        flags raised, and the rejecting ones returned."""
        import torch

        from evaluator.judge import exploits

        expected: dict[tuple[int, int], tuple[list[dict], Any]] = {}
        for a in attempts:
            for rec, sampled in zip(a["ref_records"], a["ref_outputs"], strict=True):
                expected.setdefault((rec["j"] + a["offset"], rec["k"]), (rec["outputs"], sampled))
        for a, start in zip(attempts, _starts(attempts), strict=True):
            for rec in records[start:start + len(a["cand"].records)]:
                rec["j"] += a["offset"]
        for c, rec in enumerate(records):
            rec["c"] = c

        def expected_for(j: int, k: int) -> tuple[list[dict], Any] | None:
            if (j, k) not in expected:
                if j < 0 or k < 0:
                    return None
                with torch.no_grad():
                    out = ref_model(*draw(j, k))
                self.ref_timer.sync()
                expected[(j, k)] = summarize(out)
            return expected[(j, k)]

        late = _late_samples(reply, kept, summarize)
        made = reply.get("made")
        with torch.no_grad(), self.gate.shared():
            flags, details = exploits.verify_timed_calls(
                records, outputs, late, expected_for, claimed_calls=len(records),
                made_calls=made if isinstance(made, int) and not isinstance(made, bool) else -1,
                atol=self.job["atol"], rtol=self.job["rtol"],
                untimed_answers=self.trial_answers)
            details["refresh"] = str(self.checks.get("refresh") or "none")
            if {f for f in flags if f in exploits.REJECTING} == {"timed_output_incorrect"} and (
                    details.get("wrong_calls")):
                self._recheck_untimed(ref_model, draw, flags, details,
                                      timed=_timed_summaries(records, outputs, details))
        self.checks["timed_calls"] = details
        self.flag_all(flags, details)
        state = reply.get("probe") if isinstance(reply.get("probe"), dict) else {}
        self.flag_all(*exploits.state_flags(state))
        return [f for f in flags if f in exploits.REJECTING]

    def _recheck_untimed(self, ref_model: Any, draw: Any, flags: list[str],
                         details: dict[str, Any], *, timed: dict | None = None) -> None:
        """A timed call returned a wrong output: run the candidate again, untimed, on the same
        inputs (drawn anew here, the judge's own copy) before naming it. Wrong there too is an
        honest mistake on those inputs: `incorrect`, naming their seed. Right there, the timed
        outputs are held to the reference's own call-to-call spread on those inputs (honest
        numerics: a library that picks its algorithm by the memory it finds, as cuDNN does,
        differs between calls, and so does the reference): within it they are right. Beyond it
        is the exploit: the kernel behaved differently when timed."""
        import torch

        from evaluator.samples import draw_seed

        j, k = details["wrong_calls"][0]
        seeds = self.result["seeds"]
        seed = seeds["timing"][j] if k == 0 and j < len(seeds["timing"]) else draw_seed(
            derive_check_seed(seeds["checks"], 1), j, k)
        inputs = draw(j, k)
        reply, outputs = self.worker.request({"cmd": "run", "k": 0}, inputs,
                                             deadline=self.deadline, phase="untimed re-check")
        if not reply.get("ok"):
            raise self._failure(reply)
        with torch.no_grad():
            expected = ref_model(*inputs)
        trial = self._compare(len(self.result["trials"]) + 1, expected, outputs)
        trial["inputs"] = {"timing_set": j, "use": k, "seed": seed}
        if trial["passed"]:
            details["untimed_recheck"] = (f"input set {j}, use {k}: right untimed, wrong when "
                                          f"timed")
            spread = self._reference_spread(ref_model, inputs, expected)
            details["reference_spread"] = spread
            if spread > 0 and timed and self._within_spread(ref_model, draw, timed, spread):
                details["untimed_recheck"] += (f"; every timed output within the reference's "
                                               f"own call-to-call spread ({spread:.3g})")
                flags.remove("timed_output_incorrect")  # the caller flags what remains
            return
        trial["diagnosis"] = self._diagnose(ref_model, inputs, expected, outputs)
        self.result["trials"].append(trial)
        details["untimed_recheck"] = f"input set {j}, use {k}: wrong untimed too"
        self.checks["timed_calls"] = details
        self.flag_all([f for f in flags if f != "timed_output_incorrect"], details)
        raise Verdict("incorrect", f"timing inputs (set {j}, use {k}, seed {seed}): "
                                   f"{trial.get('reason', 'mismatch')}")

    def _reference_spread(self, ref_model: Any, inputs: Any, first: Any) -> float:
        """How far the reference's own outputs on these inputs move between calls (the largest
        absolute difference from its first): the same call again, and on a GPU with cuDNN's
        algorithm chosen by benchmarking and then deterministically (the choices a library
        makes by the memory it finds). 0 on the CPU's deterministic kernels."""
        import torch

        from evaluator.loading import iter_tensors

        def spread_to(out: Any) -> float:
            worst = 0.0
            for a, b in zip(iter_tensors([first]), iter_tensors([out]), strict=False):
                if a.is_floating_point() and a.shape == b.shape:
                    diff = (a.double() - b.double()).abs()
                    diff = diff[torch.isfinite(diff)]
                    if diff.numel():
                        worst = max(worst, float(diff.max()))
            return worst

        cudnn = torch.backends.cudnn
        settings = [(cudnn.benchmark, cudnn.deterministic)]
        if self.device != "cpu":
            settings += [(not cudnn.benchmark, cudnn.deterministic), (False, True)]
        before = (cudnn.benchmark, cudnn.deterministic)
        worst = 0.0
        try:
            for benchmark, deterministic in settings:
                cudnn.benchmark, cudnn.deterministic = benchmark, deterministic
                with torch.no_grad():
                    out = ref_model(*inputs)
                self.ref_timer.sync()
                worst = max(worst, spread_to(out))
                del out
        finally:
            cudnn.benchmark, cudnn.deterministic = before
        return worst

    def _within_spread(self, ref_model: Any, draw: Any, timed: dict, spread: float) -> bool:
        """Whether every wrong timed output is within `spread` (twice, for the two sides'
        drifts) of the reference's on its inputs, beyond the problem's own tolerance."""
        import torch

        from evaluator.judge import exploits

        atol = float(self.job["atol"]) + 2 * spread
        for (j, k), (infos, sampled) in timed.items():
            with torch.no_grad():
                expected = self._timed_summary(ref_model(*draw(j, k)))
            self.ref_timer.sync()
            ok, _why = exploits.summary_matches(expected, infos, sampled, atol,
                                                float(self.job["rtol"]))
            if not ok:
                return False
        return True

    def _stream_check(self, cand: dict, ref: dict) -> dict[str, Any]:
        """Work on another stream, from the worker's own figures (evidence: a worker that hides
        it also hides its time from the judge's clock, which clock.vouch holds it to)."""
        check: dict[str, Any] = {}
        if self.device == "cpu" or not cand["samples_ms"]:
            return check
        # The end event does not wait for work on another stream, the device-wide synchronise
        # does, so the host interval grows past the event interval.
        gaps = [w - p - s for w, p, s in zip(cand["wall_ms"], cand["prefix_ms"],
                                             cand["samples_ms"], strict=False)]
        gap = statistics.median(gaps)
        med = statistics.median(cand["samples_ms"])
        check["median_wall_minus_event_ms"] = gap
        if gap > 0.05 + 0.5 * med:
            self.flag("unsynchronized_work", {"median_gap_ms": gap, "median_ms": med})
        # Or it started early and ran during the flush before the start event, which then
        # took longer than the same flush before the reference's calls.
        per_flush = _median_per_flush(cand)
        ref_per_flush = _median_per_flush(ref)
        if per_flush is not None and ref_per_flush is not None:
            check["flush_ms"] = {"candidate": per_flush, "reference": ref_per_flush}
            if per_flush > 1.25 * ref_per_flush + 0.01:
                self.flag("unsynchronized_work", {"flush_ms": per_flush,
                                                  "reference_flush_ms": ref_per_flush})
        return check
