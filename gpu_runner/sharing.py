"""What a job needs to share its GPU with the other evaluations on it (evaluator/gate.py).

Every kind of work a runner does on a device (evaluations, re-verifications, validations,
baselines, Nsight Compute reports) names the same gate, so that none of it runs while another
is timed. With `RUNNER_EVALUATIONS_PER_GPU` at 1, or on the CPU, jobs name no gate and each has
its device alone, as before.
"""

import os

from django.conf import settings

from evaluation.models import Hardware
from problems.models import ProblemVersion, Validation

GIB = 1 << 30
# Two CUDA contexts (judge and worker), the L2 flush buffer, the allocators' slack.
EVALUATION_OVERHEAD_BYTES = 3 * GIB
# A profiling process beside the evaluation (workers.Profiler): a third CUDA context and its
# profiler's buffers; the set it draws, with the outputs of its calls, is one more peak.
PROFILE_PROCESS_OVERHEAD_BYTES = 1 * GIB
# A cold extension built ahead of its evaluation (evaluator/runner/sandbox.py::builds_ahead):
# the judge's and the worker's contexts, a spare's profiling process it may have been handed,
# and the candidate's model, which the problems' validated peaks bound far above.
BUILD_NEED_BYTES = EVALUATION_OVERHEAD_BYTES + PROFILE_PROCESS_OVERHEAD_BYTES
# A problem never validated on a GPU: assumed this large (a runner asks for the validations its
# hardware lacks as it starts, problems.curation.validations_missing_request).
UNKNOWN_PEAK_BYTES = 8 * GIB
# The share of the device's memory that admitted evaluations may expect to use together. The
# rest holds what no ledger counts: each worker's spare processes started ahead, a CUDA
# context each (hundreds of MiB on an H100), and the allocators' fragments.
ADMIT_SHARE = 0.9


def shares_devices(hardware: Hardware) -> bool:
    return hardware.kind != Hardware.Kind.CPU and settings.RUNNER_EVALUATIONS_PER_GPU > 1


def gate_dir(hardware: Hardware) -> str | None:
    """This worker's device's gate folder (the runner names the device in the environment)."""
    if not shares_devices(hardware):
        return None
    device = os.environ.get("KBSITE_DEVICE_INDEX", "0")
    return str(settings.RUNNER_GATE_DIR / f"{hardware.slug}-gpu{device}")


def validated_peak_bytes(version: ProblemVersion | None, hardware: Hardware) -> int | None:
    """The reference's peak device memory as validated: on this hardware (its latest), else
    the largest measured on another GPU (what a problem's tensors hold barely depends on the
    card; a new kind of card thus starts from its siblings' figures, not a guess), else None."""
    if version is None:
        return None
    measured = Validation.objects.filter(problem_version=version, peak_memory_bytes__isnull=False)
    here = (measured.filter(hardware=hardware).order_by("-finished_at")
            .values_list("peak_memory_bytes", flat=True).first())
    if here is not None:
        return here
    return (measured.exclude(hardware__kind=Hardware.Kind.CPU).order_by("-peak_memory_bytes")
            .values_list("peak_memory_bytes", flat=True).first())


def memory_need_bytes(version: ProblemVersion | None, hardware: Hardware, *,
                      profile_process: bool = False) -> int:
    """What an evaluation of this problem is expected to hold on the device: its reference's
    validated peak three times over (the judge's inputs and expected outputs, the worker's
    inputs and outputs, the transfer between them) plus the processes' own; with a profiling
    process, which makes its calls beside the correctness trials, once more."""
    peak = validated_peak_bytes(version, hardware)
    peak = int(peak if peak is not None else UNKNOWN_PEAK_BYTES)
    need = EVALUATION_OVERHEAD_BYTES + 3 * peak
    if profile_process:
        need += PROFILE_PROCESS_OVERHEAD_BYTES + peak
    return need


def admitted_bytes(hardware: Hardware) -> int:
    """What the evaluations admitted on one of this hardware's devices may expect to use
    together (0 where its memory is not known)."""
    return int(ADMIT_SHARE * (hardware.memory_bytes or 0))


def profile_process_fits(version: ProblemVersion | None, hardware: Hardware) -> bool:
    """Whether a profiling process (workers.Profiler) fits beside an evaluation of this problem
    on this hardware's devices. It holds one more copy of the problem's tensors while the
    correctness trials run: with 6 GiB tensors on an 80 GB card (an H100), the judge, the
    worker and it were expected to need more than the card admits, and three honest kernels
    ran out of memory so with no other evaluation beside them. Where it does not fit, the timed
    worker makes the profiled call after the timing (RUNNER_PROFILE_PROCESS off does so for
    every problem)."""
    capacity = admitted_bytes(hardware)
    return not capacity or memory_need_bytes(version, hardware,
                                             profile_process=True) <= capacity


def sharing_fields(hardware: Hardware, version: ProblemVersion | None, *,
                   profile_process: bool = False) -> dict:
    """The job's gate fields: none when the device is not shared."""
    folder = gate_dir(hardware)
    if folder is None:
        return {}
    return {
        "gate_dir": folder,
        "memory_need_bytes": memory_need_bytes(version, hardware,
                                               profile_process=profile_process),
        "device_memory_bytes": admitted_bytes(hardware),
        "build_need_bytes": BUILD_NEED_BYTES,
        "device_slots": settings.RUNNER_EVALUATIONS_PER_GPU,
    }
