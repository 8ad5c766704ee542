"""What device this runner serves: detected once at start, stored on its Hardware."""

import os
import platform
import re
import shutil
import subprocess
from collections.abc import Callable

import torch

from evaluator import backends

# Peak memory bandwidth (GB/s) and dense matrix rates (TFLOP/s) from the vendors' data sheets;
# the speed-of-light check holds every result against these.
KNOWN_DEVICES: dict[str, dict] = {
    "H200": {"bandwidth_gbs": 4800, "tflops": {"fp32": 67, "tf32": 495, "fp16": 989, "bf16": 989}},
    "H100 80GB HBM3": {
        "bandwidth_gbs": 3350,
        "tflops": {"fp32": 67, "tf32": 495, "fp16": 989, "bf16": 989},
    },
    "A100-SXM4-80GB": {
        "bandwidth_gbs": 2039,
        "tflops": {"fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312},
    },
    "L40S": {"bandwidth_gbs": 864, "tflops": {"fp32": 91.6, "tf32": 183, "fp16": 362, "bf16": 362}},
}


def _slugify(name: str) -> str:
    name = name.lower().replace("nvidia", "").strip()
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-")[:60] or "gpu"


def _triton_version() -> str:
    try:
        import triton

        return triton.__version__
    except Exception:  # triton is optional on a CPU host
        return ""


def _driver_version() -> str:
    if not shutil.which("nvidia-smi"):
        return ""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


def _known_peaks(name: str) -> dict:
    for key, peaks in KNOWN_DEVICES.items():
        if key.lower() in name.lower():
            return peaks
    return {}


def detect(slug: str | None = None) -> dict:
    """Fields for Hardware: slug, name, kind, arch, memory, versions, peaks, backends."""
    common = {
        "torch_version": torch.__version__,
        "triton_version": _triton_version(),
        "detected": {"host": platform.node(), "python": platform.python_version()},
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        peaks = _known_peaks(props.name)
        return {
            **common,
            "slug": slug or _slugify(props.name),
            "name": props.name,
            "kind": "gpu",
            "arch": f"sm_{props.major}{props.minor}",
            "memory_bytes": props.total_memory,
            "gpu_count": torch.cuda.device_count(),
            "driver_version": _driver_version(),
            "cuda_version": torch.version.cuda or "",
            "peak_bandwidth_gbs": peaks.get("bandwidth_gbs"),
            "peak_tflops": peaks.get("tflops", {}),
            # Every backend the table offers on a GPU; the self-test leaves out what cannot run
            # here, saying why: a package not installed, a compiler that does not target this
            # GPU (cuTile on a Hopper one).
            "backends": backends.offered_on("gpu"),
        }
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        memory = None
    return {
        **common,
        "slug": slug or "cpu",
        "name": _cpu_name(),
        "kind": "cpu",
        "arch": platform.machine(),
        "memory_bytes": memory,
        "gpu_count": 0,
        "driver_version": "",
        "cuda_version": "",
        "peak_bandwidth_gbs": None,
        "peak_tflops": {},
        "backends": backends.offered_on("cpu"),
    }


def self_tested(detected: dict, *, build_dir: str, log: Callable[[str], None],
                run: Callable[[dict], dict] | None = None) -> list[str]:
    """The detected backends that pass this runner's self-test (evaluator/runner/selftest.py),
    in their order; each one left out is logged with its reason."""
    from evaluator.runner.selftest import self_test

    device = "cpu" if detected.get("kind") == "cpu" else "cuda"
    report = self_test(device, detected.get("backends") or [], build_dir=build_dir, run=run,
                       arch=detected.get("arch"))
    for name, outcome in report.items():
        if outcome["served"]:
            log(f"self-test: {name} served ({outcome['seconds']:g} s)")
        else:
            log(f"self-test: {name} not offered: {outcome['why']}")
    return [name for name, outcome in report.items() if outcome["served"]]


def untested(detected: dict, *, log: Callable[[str], None]) -> list[str]:
    """The detected backends a runner without its self-test offers (RUNNER_SELF_TEST off): all
    but those whose compiler does not target this GPU, each logged with its reason."""
    served = []
    for name in detected.get("backends") or []:
        why = "" if detected.get("kind") == "cpu" else backends.get(name).unsupported_arch(
            detected.get("arch"))
        if why:
            log(f"{name} not offered: {why}")
        else:
            served.append(name)
    return served
