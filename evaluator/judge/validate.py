"""Reference-only modes of the judge: validating a problem, and measuring its baselines.

The judge (`judge.run_mode`) calls `run(job, events, workdir)` for jobs whose mode is "validate"
or "baseline"; it runs in the sandboxed child like an evaluation, and imports no Django.

validate: the reference loads and runs; it gives the same outputs when called twice and when
rebuilt from the same seed; its outputs are finite, not one constant, not so close to zero that
zeros pass, and change when its inputs (each of them) change; its peak memory and time are
measured. Every problem found is a finding {"code", "message"} whose message says in plain words
what was seen and why it matters. Facts that do not block publishing are notes.

baseline: the reference's time, eager and under torch.compile, by `timing.time_callable`, the
method that times candidates.
"""

from __future__ import annotations

import resource
import time
import traceback
from pathlib import Path
from typing import Any

from evaluator import EVALUATOR_VERSION
from evaluator.errors import is_oom, short_message, unavailable_reason

REFERENCE_MODULE = "kb_reference"
GIB = 1024**3
SMALL_CARD_BYTES = 24 * GIB  # the memory of common 24 GB cards
_CHUNK = 1 << 24  # elements per step when scanning outputs, so huge outputs need little memory


def _timing_options(job: dict) -> dict:
    """The job's timing settings as time_callable's keywords (the set count is ours to use)."""
    return {k: v for k, v in job["timing"].items() if k not in ("sets", "input_sets")}


def _set_count(job: dict, default: int) -> int:
    return max(1, int(job["timing"].get("sets", default)))


class _Stop(Exception):  # ends a validation early with what was found
    pass


def run(job: dict, events: Any, workdir: Path) -> dict:
    from evaluator.judge.baseline import measure_baseline

    single = measure_baseline if job.get("mode") == "baseline" else validate
    if not job.get("batch"):
        return single(job, events.emit)
    return run_batch(job, events.emit, single)


def run_batch(job: dict, emit, single) -> dict:
    """Several references one after another in this process, to spare a process start and a
    device initialisation per problem in bulk runs. Each result goes out as an "item" event as
    soon as it exists, so a batch cut short by a crash or the time limit loses only the rest
    (which the caller then runs one by one, each in its own process)."""
    from evaluator.config import DEFAULT_TOLERANCE

    results = {}
    for item in job["batch"]:
        key = str(item["key"])
        sub = {k: v for k, v in job.items() if k != "batch"}
        sub.update({k: v for k, v in item.items() if k != "key" and v is not None})
        for name in ("atol", "rtol"):
            if item.get(name) is None:
                sub[name] = DEFAULT_TOLERANCE.get(sub["precision"], 1e-4)
        emit({"type": "phase", "phase": f"problem {key}"})
        result = single(sub, emit)
        emit({"type": "item", "key": key, "result": result})
        results[key] = result
        del result
        _release(sub["device"], sub.get("mode"))
    return {"mode": job.get("mode"), "verdict": "done", "batch": results,
            "evaluator_version": EVALUATOR_VERSION}


def _release(device: str, mode: str | None) -> None:
    """Leave nothing of the previous problem behind: memory, peak counters, compiled graphs."""
    import gc
    import sys

    import torch

    sys.modules.pop(REFERENCE_MODULE, None)
    if mode == "baseline":
        torch._dynamo.reset()
    gc.collect()
    if device != "cpu":
        torch.cuda.empty_cache()


# --- helpers -------------------------------------------------------------------------------------


def _call(model: Any, inputs: list, device: str) -> Any:
    """One forward on copies of the inputs (a reference that changes its inputs in place must
    not change what the next check sees)."""
    import torch

    from evaluator.loading import clone_value, synchronize

    with torch.no_grad():
        outputs = model(*clone_value(inputs))
    synchronize(device)
    return outputs


def _positions(outputs: Any) -> list:
    """The output's leaves in order, numbers as tensors (so every check handles one kind)."""
    import torch

    if isinstance(outputs, (list, tuple)):
        leaves: list = []
        for value in outputs:
            leaves.extend(_positions(value))
        return leaves
    if isinstance(outputs, (bool, int, float)):
        outputs = torch.tensor(outputs)
    if isinstance(outputs, torch.Tensor) and outputs.dtype == torch.bool:
        outputs = outputs.to(torch.uint8)  # so min, max and abs work on it
    return [outputs]


def _scan(tensor: Any, step) -> bool:
    """True when `step(chunk)` is true for every chunk of the flattened tensor."""
    return all(step(chunk) for chunk in _chunks(tensor))


def _fits_constant(tensors: list, value: float, atol: float, rtol: float) -> bool:
    """Would a tensor filled with `value` pass the comparison against each of `tensors`?"""
    import torch

    def step(chunk) -> bool:
        if not chunk.is_floating_point():
            return bool((chunk == value).all())
        expected = chunk.to(torch.float64)
        allowed = atol + rtol * expected.abs()
        return bool(((expected - value).abs() <= allowed).all())

    return all(_scan(t, step) for t in tensors)


def _chunks(tensor: Any):
    flat = tensor.detach().reshape(-1)
    for start in range(0, flat.numel(), _CHUNK):
        yield flat[start:start + _CHUNK]


def _value_range(tensors: list) -> tuple[float, float]:
    lows, highs = [], []
    for t in tensors:
        for chunk in _chunks(t):
            low, high = chunk.aminmax()
            lows.append(float(low))
            highs.append(float(high))
    return min(lows), max(highs)


def _max_abs(tensors: list) -> float:
    return max((float(c.abs().max()) for t in tensors for c in _chunks(t)), default=0.0)


def _nonfinite(outputs: Any) -> tuple[int, int]:
    import torch

    bad = total = 0
    for t in _positions(outputs):
        if not isinstance(t, torch.Tensor):
            continue
        total += t.numel()
        if t.is_floating_point() or t.is_complex():
            bad += int((~torch.isfinite(t)).sum())
    return bad, total


def _describe_input(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return f"{tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}"
    return type(value).__name__


def _same_value(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    try:
        return bool(a == b)
    except Exception:  # values that cannot be compared count as different
        return False


class _Memory:
    """Peak memory of the reference: the device's allocator on a GPU, the process's peak
    resident size on the CPU (which includes the interpreter and torch)."""

    def __init__(self, device: str):
        self.device = device

    def reset(self) -> None:
        if self.device != "cpu":
            import torch

            torch.cuda.reset_peak_memory_stats(self.device)

    def peak(self) -> tuple[int, str]:
        if self.device != "cpu":
            import torch

            return int(torch.cuda.max_memory_allocated(self.device)), "device allocator peak"
        return (
            int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024,
            "process peak resident memory",
        )


# --- validate ------------------------------------------------------------------------------------


class Validator:
    def __init__(self, job: dict, emit):
        self.job = job
        self.emit = emit
        self.device: str = job["device"]
        self.precision: str = job["precision"]
        self.atol: float = float(job["atol"])
        self.rtol: float = float(job["rtol"])
        self.findings: list[dict] = []
        self.notes: list[dict] = []
        self.checks: dict[str, Any] = {}
        # Set by the steps in order (_prepare, _load, _run_once, _check_rebuild).
        self.seeds: dict[str, Any] = {}
        self.memory: _Memory | None = None
        self.module: Any = None
        self.init_inputs: Any = None
        self.model: Any = None
        self.inputs_a: Any = None
        self.out_a: Any = None
        self.result: dict[str, Any] = {
            "mode": "validate",
            "verdict": "validated",  # the validation ran; `status` says what it found
            "status": "passed",
            "findings": self.findings,
            "notes": self.notes,
            "checks": self.checks,
            "peak_memory_bytes": None,
            "reference": None,
            "environment": {},
            "seeds": {},
            "phases": {},
            "error": "",
            "traceback": "",
            "evaluator_version": EVALUATOR_VERSION,
            "tolerance": {"atol": self.atol, "rtol": self.rtol},
        }

    def find(self, code: str, message: str, **facts: Any) -> None:
        if all(f["code"] != code for f in self.findings):
            self.findings.append({"code": code, "message": message, **facts})

    def phase(self, name: str) -> None:
        self.emit({"type": "phase", "phase": name})

    def agree(self, expected: Any, actual: Any) -> dict:
        from evaluator.judge.compare import compare_outputs

        return compare_outputs(
            expected, actual, atol=self.atol, rtol=self.rtol, expected_device=self.device
        )

    def tolerance_text(self) -> str:
        return f"atol {self.atol:g}, rtol {self.rtol:g}"

    def fail(self, stage: str, exc: BaseException) -> _Stop:
        unavailable = unavailable_reason(exc)
        if unavailable:
            self.find("problem_unavailable", unavailable)
        elif is_oom(exc):
            self.find(
                "out_of_memory",
                f"The reference ran out of memory while it {stage} on {self.device} "
                f"({short_message(exc, 300)}). Its inputs or weights are too large for this "
                "hardware, so nothing can be evaluated against it here.",
            )
        else:
            self.find(
                "does_not_run",
                f"The reference failed while it {stage}: {short_message(exc, 600)}. Nothing "
                "can be evaluated against a reference that does not run.",
            )
        self.result["status"] = "failed"
        self.result["error"] = short_message(exc)
        self.result["traceback"] = "".join(traceback.format_exception(exc))[-8000:]
        return _Stop()

    def run(self) -> dict:
        started = time.perf_counter()
        try:
            self._run()
        except _Stop:
            pass
        if self.result["status"] != "failed":
            self.result["status"] = "flagged" if self.findings else "passed"
        self.result["phases"]["total"] = time.perf_counter() - started
        return self.result

    def _run(self) -> None:
        """The validation's steps, in order; each may stop it (_Stop) with what it found."""
        self._prepare()
        self._load()
        self._run_once()
        self._check_determinism()
        self._check_rebuild()
        self._check_outputs()
        self.phase("timing")
        self._time(self.model, self.module, self.seeds["timing"])

    def _prepare(self) -> None:
        import torch

        from evaluator import environment
        from evaluator.loading import derive_seed

        device = self.device
        if device != "cpu" and not torch.cuda.is_available():
            self.result.update(
                verdict="harness_error",
                status="error",
                error=f"device {device} requested but CUDA is not available on this runner",
            )
            raise _Stop()
        self.result["environment"] = environment.collect(device)
        seed = int(self.job["seed"])
        n_sets = _set_count(self.job, 2)
        self.seeds = {
            "server": seed,
            "init": derive_seed(seed, "init"),
            "a": derive_seed(seed, "validate", 0),
            "b": derive_seed(seed, "validate", 1),
            "timing": [derive_seed(seed, "timing", j) for j in range(n_sets)],
        }
        self.result["seeds"] = self.seeds
        self.memory = _Memory(device)

    def _load(self) -> None:
        from evaluator.loading import build_model, make_init_inputs, module_from_source

        self.phase("loading")
        t0 = time.perf_counter()
        try:
            self.module = module_from_source(self.job["reference_source"], REFERENCE_MODULE)
        except BaseException as exc:  # whatever the file raises at import
            raise self.fail("was loaded", exc) from None
        try:
            self.init_inputs = make_init_inputs(self.module, self.seeds["init"])
            self.memory.reset()
            self.model = build_model(self.module.Model, self.init_inputs, self.seeds["init"],
                                     self.device, self.precision)
        except BaseException as exc:
            raise self.fail("built its model", exc) from None
        self.result["phases"]["load"] = time.perf_counter() - t0

    def _run_once(self) -> None:
        """One call on the first input set: its peak memory, and outputs that are finite."""
        from evaluator.loading import make_inputs

        device = self.device
        self.phase("running")
        try:
            self.inputs_a = make_inputs(self.module, self.seeds["a"], device, self.precision)
            self.out_a = _call(self.model, self.inputs_a, device)
        except BaseException as exc:
            raise self.fail("ran on its inputs", exc) from None
        peak, how = self.memory.peak()
        self.result["peak_memory_bytes"] = peak
        self.checks["memory"] = {"peak_bytes": peak, "measured_as": how}
        if device != "cpu" and peak > SMALL_CARD_BYTES:
            self.notes.append({
                "code": "needs_more_than_24gb",
                "message": f"Peak device memory was {peak / GIB:.1f} GiB: the problem does not "
                "fit on a 24 GB card, only on larger ones.",
            })

        bad, total = _nonfinite(self.out_a)
        self.checks["finite"] = {"nonfinite": bad, "elements": total}
        if bad:
            self.find(
                "nonfinite_output",
                f"{bad} of {total} output values are NaN or infinite. The evaluator never "
                "accepts NaN, so no kernel could be judged correct on this problem.",
            )
            raise _Stop()  # the comparisons below cannot tell anything apart with NaN in them

    def _check_determinism(self) -> None:
        self.phase("checking determinism")
        try:
            out_again = _call(self.model, self.inputs_a, self.device)
        except BaseException as exc:
            raise self.fail("ran a second time", exc) from None
        same = self.agree(self.out_a, out_again)
        self.checks["repeat"] = _comparison(same)
        if not same["passed"]:
            self.find(
                "nondeterministic",
                "Calling the reference twice on the same inputs gave different outputs "
                f"({_why(same)}; {self.tolerance_text()}). It draws random numbers or keeps "
                "state in forward (dropout left active, random noise), so a correct kernel "
                "would fail or pass by chance.",
            )

    def _check_rebuild(self) -> None:
        """Built again from the same seeds: the weights and the inputs must come out the same."""
        from evaluator.loading import build_model, make_inputs

        seeds, device = self.seeds, self.device
        self.model = None
        try:
            rebuilt = build_model(self.module.Model, self.init_inputs, seeds["init"], device,
                                  self.precision)
            inputs_a2 = make_inputs(self.module, seeds["a"], device, self.precision)
            out_rebuilt = _call(rebuilt, inputs_a2, device)
        except BaseException as exc:
            raise self.fail("was built again from the same seed", exc) from None
        self.model = rebuilt
        same_inputs = _same_value(self.inputs_a, inputs_a2)
        same = self.agree(self.out_a, out_rebuilt)
        self.checks["rebuild"] = {**_comparison(same), "same_inputs": same_inputs}
        if not same_inputs or not same["passed"]:
            what = "inputs" if not same_inputs else "outputs"
            self.find(
                "not_reproducible",
                f"Building the model and its inputs again from the same seed gave different "
                f"{what}. The problem depends on something besides the seed (the clock, "
                "os.urandom, an unseeded generator), so its results cannot be reproduced.",
            )

    def _check_outputs(self) -> None:
        """A second input set: inputs that change with the seed, outputs finite, neither
        degenerate nor insensitive to the inputs."""
        from evaluator.loading import make_inputs

        self.phase("checking outputs")
        try:
            inputs_b = make_inputs(self.module, self.seeds["b"], self.device, self.precision)
            out_b = _call(self.model, inputs_b, self.device)
        except BaseException as exc:
            raise self.fail("ran on a second input set", exc) from None
        fixed = _same_value(self.inputs_a, inputs_b)
        self.checks["inputs_differ_by_seed"] = not fixed
        if fixed:
            self.find(
                "fixed_inputs",
                "get_inputs() returns the same values whatever the seed, so every trial checks "
                "the same inputs and a kernel could return a stored answer.",
            )
        bad, total = _nonfinite(out_b)
        if bad:
            self.find(
                "nonfinite_output",
                f"{bad} of {total} output values are NaN or infinite on a second input set. "
                "The evaluator never accepts NaN, so no kernel could be judged correct.",
            )
            raise _Stop()
        degenerate = self._check_degenerate(self.out_a, out_b)
        if not fixed and not degenerate:
            self._check_sensitivity(self.model, self.inputs_a, inputs_b, self.out_a, out_b)

    def _check_degenerate(self, out_a: Any, out_b: Any) -> bool:
        """Constant or near-zero outputs (over both input sets); True when either was found."""
        import torch

        a, b = _positions(out_a), _positions(out_b)
        if len(a) != len(b) or not all(isinstance(t, torch.Tensor) for t in a + b):
            self.find(
                "unstable_output",
                "The reference returns outputs of a different structure for different inputs, "
                "so they cannot be compared.",
            )
            return True
        pairs = [[x, y] for x, y in zip(a, b, strict=True) if x.numel() or y.numel()]
        if not pairs:
            self.find("empty_output", "The reference returns only empty tensors.")
            return True
        largest = max(_max_abs(pair) for pair in pairs)
        zeros_pass = all(_fits_constant(pair, 0.0, self.atol, self.rtol) for pair in pairs)
        self.checks["near_zero"] = {"max_abs": largest, "zeros_pass": zeros_pass}
        if zeros_pass:
            detail = "always exactly zero" if largest == 0 else f"at most {largest:.3g} in size"
            self.find(
                "near_zero_output",
                f"The output is {detail}, within the tolerance of zero ({self.tolerance_text()})"
                ". A kernel that returns zeros without computing anything would be judged "
                "correct.",
            )
            return True
        constants = []
        for pair in pairs:
            low, high = _value_range(pair)
            middle = (low + high) / 2
            if not _fits_constant(pair, middle, self.atol, self.rtol):
                constants = []
                break
            constants.append(middle)
        self.checks["constant"] = {"constant": bool(constants), "values": constants[:8]}
        if constants:
            shown = ", ".join(f"{c:.4g}" for c in constants[:4])
            self.find(
                "constant_output",
                f"Every output value equals the same constant ({shown}) within the tolerance, "
                "on every input set tried. A kernel that fills its output with that constant "
                "would be judged correct without computing anything.",
            )
            return True
        return False

    def _check_sensitivity(
        self, model: Any, inputs_a: list, inputs_b: list, out_a: Any, out_b: Any
    ) -> None:
        same = self.agree(out_b, out_a)
        self.checks["inputs_change_output"] = not same["passed"]
        if same["passed"]:
            self.find(
                "input_insensitive",
                "The output stays the same, within the tolerance, when the inputs change. A "
                "kernel could return a stored result without reading its inputs.",
            )
            return
        varying = [
            i for i, (x, y) in enumerate(zip(inputs_a, inputs_b, strict=True))
            if not _same_value(x, y)
        ]
        if len(inputs_a) < 2 or not varying:
            return
        ignored = []
        for i in varying:
            mixed = list(inputs_a)
            mixed[i] = inputs_b[i]
            try:
                out_mixed = _call(model, mixed, self.device)
            except BaseException as exc:
                raise self.fail(f"ran with only input {i} changed", exc) from None
            if self.agree(out_mixed, out_a)["passed"]:
                ignored.append(i)
            del out_mixed
        self.checks["ignored_inputs"] = ignored
        if ignored:
            names = ", ".join(f"input {i} ({_describe_input(inputs_a[i])})" for i in ignored)
            self.find(
                "input_ignored",
                f"Changing {names} alone, to new random values like the old ones, leaves the "
                "output unchanged within the tolerance: the output depends on how the values "
                "are spread, not on the values themselves (a mean over many elements, say). A "
                "kernel could skip reading it, or read only a part, and still be judged correct.",
                inputs=ignored,
            )

    def _time(self, model: Any, module: Any, timing_seeds: list[int]) -> None:
        from evaluator.loading import make_inputs
        from evaluator.timing import summarize, time_callable

        try:
            sets = [make_inputs(module, s, self.device, self.precision) for s in timing_seeds]
            stats = time_callable(model, sets, self.device, **_timing_options(self.job))
        except BaseException as exc:
            raise self.fail("was timed", exc) from None
        summary = summarize(stats["samples_ms"])
        self.result["reference"] = summary
        self.checks["timing"] = {k: stats[k] for k in ("n", "stopped", "rel_err", "input_sets")}


def _comparison(result: dict) -> dict:
    return {
        "agree": result["passed"],
        "max_abs_diff": result.get("max_abs_diff"),
        "reason": result.get("reason", ""),
    }


def _why(result: dict) -> str:
    diff = result.get("max_abs_diff")
    if diff is not None and not result.get("reason", "").startswith("values differ"):
        return result.get("reason", "")
    return f"largest difference {diff:.3g}" if diff is not None else result.get("reason", "")


def validate(job: dict, emit) -> dict:
    return Validator(job, emit).run()
