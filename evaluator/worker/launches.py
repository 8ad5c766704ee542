"""The calls that launch the candidate's kernels in the languages whose kernels their package's
Python code compiles and launches (Helion, TileLang, CuTe DSL, cuTile), for the worker's
profiled call (probe.OwnCodeProfile counts them as the candidate's own calls).

What these packages run on the device is generated into their caches, outside the candidate's
folder, so the launch is recognised by the package's entry point instead: its code object (or,
for cuTile, its C function), found in sys.modules, so a language is looked up only where the
candidate's code imported it and nothing here imports one. A call counts where the kernel object
leads to a function of the candidate's files or, where the object does not say (compiled CuTe
launchers, cuTile's launch), where the candidate's code made it. That the kernels are really the
source's is the judge's to check (judge/evidence.py), never this count's.
"""

from __future__ import annotations

import sys
import types
from typing import Any

# Attributes that lead from a kernel object to the function it was made from.
_LEADS = ("fn", "orig_func", "prim_func", "func", "_pyfunc")
# Caller frames that may stand between the candidate's code and a TileLang kernel's __call__
# (its own jit wrapper calls the kernel it compiled).
_TILELANG_CALLERS = 2


def _method_code(module: str, cls: str, name: str = "__call__") -> types.CodeType | None:
    klass = getattr(sys.modules.get(module), cls, None)
    method = vars(klass).get(name) if isinstance(klass, type) else None
    return getattr(method, "__code__", None)


def _nested_code(code: Any, name: str, depth: int = 3) -> types.CodeType | None:
    """The code object of a function named `name` defined inside `code` (a closure's)."""
    if not isinstance(code, types.CodeType) or depth < 0:
        return None
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name == name:
                return const
            found = _nested_code(const, name, depth - 1)
            if found is not None:
                return found
    return None


def _subclass_calls(module: str, cls: str) -> set[int]:
    """The ids of the __call__ code of a class and of every subclass of it that defines its own
    (ids: hashing a code object hashes its whole body, and the hook asks on every call)."""
    root = getattr(sys.modules.get(module), cls, None)
    if not isinstance(root, type):
        return set()
    codes, todo = set(), [root]
    while todo and len(codes) < 64:
        klass = todo.pop()
        todo.extend(klass.__subclasses__())
        code = getattr(vars(klass).get("__call__"), "__code__", None)
        if code is not None:
            codes.add(id(code))
    return codes


class Launches:
    """Recognises the launches of the candidate's kernels (`prefix`: the candidate's folder)."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.helion = _method_code("helion.runtime.kernel", "Kernel")
        self.tilelang = _method_code("tilelang.jit.kernel", "JITKernel")
        # CuTe DSL: a @cute.jit function called from Python runs its DSL's `jit_wrapper`
        # closure (the function in `func`); one compiled by cute.compile, a compiled function.
        dsl = getattr(sys.modules.get("cutlass.base_dsl.dsl"), "BaseDSL", None)
        self.cute_wrapper = _nested_code(getattr(getattr(dsl, "jit_runner", None), "__code__",
                                                 None), "jit_wrapper")
        self.cute_compiled = _subclass_calls("cutlass.base_dsl.jit_executor",
                                             "JitCompiledFunction")
        cext = sys.modules.get("cuda.tile._cext")
        self.cutile = {id(f) for f in (getattr(cext, "launch", None),
                                       getattr(cext, "launch_extended", None)) if f is not None}

    def _candidates(self, code: Any) -> bool:
        return isinstance(code, types.CodeType) and code.co_filename.startswith(self.prefix)

    def _leads_to_candidate(self, obj: Any) -> Any:
        """The candidate's function that `obj` (a kernel object) was made from, or None."""
        todo, seen = [obj], 0
        while todo and seen < 12:
            obj = todo.pop(0)
            seen += 1
            if self._candidates(getattr(obj, "__code__", None)):
                return obj
            for attr in _LEADS:
                try:
                    todo.append(getattr(obj, attr))
                except Exception:  # a compiled object may raise anything for a missing name
                    continue
        return None

    def _called_by_candidate(self, frame: Any, levels: int) -> bool:
        for _ in range(levels):
            frame = frame.f_back
            if frame is None:
                return False
            if self._candidates(frame.f_code):
                return True
        return False

    def call(self, frame: Any) -> str | None:
        """The launched kernel's name, where this Python call launches one of the candidate's."""
        code = frame.f_code
        if code is self.helion or code is self.tilelang:
            obj = frame.f_locals.get("self")
            own = self._leads_to_candidate(obj)
            if own is not None:
                return str(getattr(own, "__name__", "kernel"))
            if code is self.tilelang and self._called_by_candidate(frame, _TILELANG_CALLERS):
                return "tilelang kernel"
            return None
        if code is self.cute_wrapper:
            func = frame.f_locals.get("func")
            return str(func.__name__) if self._candidates(getattr(func, "__code__", None)) \
                else None
        if id(code) in self.cute_compiled and self._called_by_candidate(frame, 1):
            return str(getattr(frame.f_locals.get("self"), "function_name", None) or "cute")
        return None

    def c_call(self, frame: Any, func: Any) -> str | None:
        """The launch's name, where this C call (cuTile's launch) is made by the candidate's
        code: the kernel is an argument, which a profile hook does not see."""
        if id(func) in self.cutile and self._candidates(frame.f_code):
            return "cuda.tile.launch"
        return None
