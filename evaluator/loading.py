"""Loading problems and solutions; seeds; inputs; building models.

Reusable by every mode (evaluate here, validate/baseline elsewhere): nothing in this module knows
about verdicts or processes.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import linecache
import random
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

PRECISION_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def derive_seed(server_seed: int, label: str, index: int = 0) -> int:
    """A seed for one purpose (init, trial k, timing set j) derived from the server's seed.

    A hash, so knowing one derived seed (the worker learns the init seed) reveals nothing about
    the others or about the server's seed.
    """
    digest = hashlib.sha256(f"{server_seed}:{label}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1  # torch.manual_seed wants < 2**63


def seed_everything(seed: int) -> None:
    # torch.manual_seed also seeds every CUDA device; some problems draw from random or numpy.
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed % 2**32)
    except ImportError:
        pass


def module_from_source(source: str, name: str, path: Path | None = None) -> types.ModuleType:
    """Execute `source` as a module named `name`.

    With `path`, the source is written there first and imported from the file: triton's @jit
    reads a kernel's source with inspect, which needs a real file. Without a path, the source
    is registered in linecache so tracebacks still show its lines.
    """
    if path is not None:
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, str(path))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses, pickling and triton look modules up here
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module
    filename = f"<{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    try:
        exec(compile(source, filename, "exec"), module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


@contextlib.contextmanager
def default_device(device: str) -> Iterator[None]:
    """Make tensor factories in get_inputs() and a model's __init__ create on `device` directly
    (no host round trip)."""
    if device == "cpu":
        yield
    else:
        with torch.device(device):
            yield


def cast_value(value: Any, device: str, dtype: torch.dtype) -> Any:
    """Move tensors to `device`; floating tensors take the precision's dtype, others keep theirs.

    KernelBench casts every input to float, which breaks problems with integer targets
    (cross-entropy, embedding indices): integer and bool tensors keep their dtype here.
    """
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            return value.to(device=device, dtype=dtype)
        return value.to(device=device)
    if isinstance(value, list):
        return [cast_value(v, device, dtype) for v in value]
    if isinstance(value, tuple):
        return tuple(cast_value(v, device, dtype) for v in value)
    return value


def make_inputs(module: types.ModuleType, seed: int, device: str, precision: str) -> list:
    """One input set: get_inputs() under `seed`, created on `device`, cast to the precision."""
    seed_everything(seed)
    with default_device(device):
        inputs = module.get_inputs()
    return list(cast_value(list(inputs), device, PRECISION_DTYPES[precision]))


def make_init_inputs(module: types.ModuleType, seed: int) -> list:
    seed_everything(seed)
    get_init = getattr(module, "get_init_inputs", None)
    return list(get_init()) if get_init is not None else []


def build_model(
    cls: Callable[..., torch.nn.Module],
    init_inputs: list,
    seed: int,
    device: str,
    precision: str,
) -> torch.nn.Module:
    """Construct a model with `seed` (same seed for Model and ModelNew, so weights match).

    Built on the device (its tensor factories' default), so both models draw their weights from
    that device's generator, seeded alike, then moved to the precision, in eval mode. KernelBench
    builds on the CPU and moves the model: on an H100 host, loading a level-2 GEMM's took 5.5 to
    10.6 s of its evaluation, in the worker, and again in the judge and the profiling process
    (drawing 55_Matmul_MaxPool_Sum_Scale's billion weights on a 2-core CPU takes 5.9 s).
    """
    seed_everything(seed)
    with default_device(device):
        model = cls(*init_inputs)
    if isinstance(model, torch.nn.Module):
        model = model.to(device=device)
        dtype = PRECISION_DTYPES[precision]
        if dtype != torch.float32:
            model = model.to(dtype=dtype)
        model.eval()
    return model


def clone_value(value: Any) -> Any:
    """Deep copy of tensors inside lists/tuples (inputs handed out are copies)."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list):
        return [clone_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(clone_value(v) for v in value)
    return value


def iter_tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from iter_tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from iter_tensors(v)


def synchronize(device: str) -> None:
    if device != "cpu":
        torch.cuda.synchronize(torch.device(device))
