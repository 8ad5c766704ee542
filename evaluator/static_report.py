"""The static report: what a candidate's source uses, read with `ast`, never executed.

Shown to the submitter and admins as evidence next to the verdict. It is never the only defence
(every pattern here has an honest use somewhere); the judge's runtime checks decide the verdict.
The one finding that becomes a flag is `problem_size_changed`: a module-level constant that the
reference also defines, given another value (sizes are the reference's, never the candidate's).
The reference's own values are in one place only, `problem_constants_changed[name]["reference"]`
(and the flag's details, a copy of it): a private problem's reference is not its submitters' to
read, and the site leaves them out for whoever may not see the reference (without_reference).
No torch import: the judge calls this before anything heavy.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from evaluator import backends

REPORT_VERSION = 1
MAX_FINDINGS = 100

SEVERITY_ORDER = {"none": 0, "low": 1, "medium": 2, "high": 3}

# Imported modules worth a note: (severity, category).
MODULES: dict[str, tuple[str, str]] = {
    "ctypes": ("high", "raw memory and native calls"),
    "gc": ("high", "memory introspection"),
    "inspect": ("medium", "frame introspection"),
    "importlib": ("medium", "dynamic imports"),
    "builtins": ("high", "patching builtins"),
    "threading": ("medium", "threads"),
    "_thread": ("medium", "threads"),
    "concurrent": ("medium", "threads"),
    "multiprocessing": ("medium", "processes"),
    "subprocess": ("high", "processes"),
    "asyncio": ("medium", "threads"),
    "signal": ("medium", "signals"),
    "socket": ("high", "network"),
    "urllib": ("high", "network"),
    "http": ("high", "network"),
    "requests": ("high", "network"),
    "pickle": ("medium", "serialisation"),
    "marshal": ("medium", "serialisation"),
    "mmap": ("high", "raw memory and native calls"),
    "time": ("medium", "timers"),
    "timeit": ("medium", "timers"),
    "statistics": ("low", "timers"),
    "atexit": ("medium", "process lifecycle"),
    "weakref": ("low", "memory introspection"),
    "evaluator": ("high", "the harness"),
    "evaluation": ("high", "the harness"),
    "kb_reference": ("high", "reading the reference"),
    "kb_candidate": ("high", "the harness"),
}

# Dotted names (as written, after resolving `import x as y`): (severity, category).
CALLS: dict[str, tuple[str, str]] = {
    "sys._getframe": ("high", "frame introspection"),
    "sys._current_frames": ("high", "frame introspection"),
    "sys.settrace": ("high", "tracing hooks"),
    "sys.setprofile": ("high", "tracing hooks"),
    "sys.modules": ("medium", "dynamic imports"),
    "sys.exit": ("low", "process lifecycle"),
    "os.environ": ("medium", "environment"),
    "os.getenv": ("medium", "environment"),
    "os.getppid": ("high", "the harness"),
    "os.fork": ("high", "processes"),
    "os.system": ("high", "processes"),
    "os.popen": ("high", "processes"),
    "os.kill": ("high", "processes"),
    "os._exit": ("medium", "process lifecycle"),
    "gc.get_objects": ("high", "memory introspection"),
    "gc.get_referrers": ("high", "memory introspection"),
    "gc.get_referents": ("high", "memory introspection"),
    "inspect.stack": ("high", "frame introspection"),
    "inspect.currentframe": ("high", "frame introspection"),
    "importlib.import_module": ("medium", "dynamic imports"),
    "__import__": ("medium", "dynamic imports"),
    "exec": ("medium", "dynamic code"),
    "eval": ("medium", "dynamic code"),
    "compile": ("low", "dynamic code"),
    "globals": ("low", "dynamic code"),
    "open": ("low", "files"),
    "setattr": ("medium", "monkeypatching"),
    "threading.Thread": ("high", "threads"),
    "_thread.start_new_thread": ("high", "threads"),
    "concurrent.futures.ThreadPoolExecutor": ("high", "threads"),
    "concurrent.futures.ProcessPoolExecutor": ("high", "processes"),
    "multiprocessing.Process": ("high", "processes"),
    "torch.cuda.Stream": ("high", "extra streams"),
    "torch.cuda.stream": ("high", "extra streams"),
    "torch.cuda.ExternalStream": ("high", "extra streams"),
    "torch.cuda.set_stream": ("high", "extra streams"),
    "torch.cuda.current_stream": ("low", "extra streams"),
    "torch.cuda.Event": ("medium", "timers"),
    "torch.cuda.synchronize": ("low", "synchronisation"),
    "torch.cuda.CUDAGraph": ("medium", "deferred work"),
    "torch.cuda.graph": ("medium", "deferred work"),
    "torch.cuda.empty_cache": ("medium", "freed memory"),
    "torch.cuda.caching_allocator_alloc": ("high", "freed memory"),
    "torch.empty": ("low", "uninitialised memory"),
    "torch.empty_like": ("low", "uninitialised memory"),
    "torch.manual_seed": ("high", "seeds"),
    "torch.seed": ("medium", "seeds"),
    "torch.initial_seed": ("high", "seeds"),
    "torch.get_rng_state": ("high", "seeds"),
    "torch.random.manual_seed": ("high", "seeds"),
    "torch.cuda.manual_seed": ("high", "seeds"),
    "torch.cuda.manual_seed_all": ("high", "seeds"),
    "random.seed": ("high", "seeds"),
    "numpy.random.seed": ("high", "seeds"),
    "torch.set_float32_matmul_precision": ("high", "precision"),
    "torch.set_default_dtype": ("high", "precision"),
    "torch.Tensor._make_subclass": ("high", "lazy outputs"),
    "torch.Tensor._make_wrapper_subclass": ("high", "lazy outputs"),
    "torch.overrides.TorchFunctionMode": ("high", "lazy outputs"),
    "torch.utils._python_dispatch.TorchDispatchMode": ("high", "lazy outputs"),
    "torch.compile": ("low", "pytorch fallback"),
    "torch.jit.script": ("low", "pytorch fallback"),
    "time.perf_counter": ("medium", "timers"),
    "time.time": ("medium", "timers"),
    "time.monotonic": ("medium", "timers"),
    "time.sleep": ("medium", "timers"),
    "time.process_time": ("medium", "timers"),
}

# Attribute names that are suspicious wherever they appear.
ATTRIBUTES: dict[str, tuple[str, str]] = {
    "__torch_function__": ("high", "lazy outputs"),
    "__torch_dispatch__": ("high", "lazy outputs"),
    "data_ptr": ("medium", "result caching"),
    "_version": ("high", "result caching"),
    "untyped_storage": ("low", "result caching"),
    "f_back": ("high", "frame introspection"),
    "f_locals": ("high", "frame introspection"),
    "f_globals": ("high", "frame introspection"),
    "__subclasses__": ("high", "memory introspection"),
    "allow_tf32": ("high", "precision"),
    "allow_fp16_reduced_precision_reduction": ("high", "precision"),
    "allow_bf16_reduced_precision_reduction": ("high", "precision"),
    "half": ("low", "precision"),
    "bfloat16": ("low", "precision"),
    "float16": ("low", "precision"),
}

# Text inside string constants (C++/CUDA sources, paths, module names).
TEXT_PATTERNS: list[tuple[str, str, str, str]] = [
    # (regex, label, severity, category)
    (r"kb_reference|\bevaluator\.[a-z_]|evaluation\.harness|kb_judge", "names the harness",
     "high", "the harness"),
    (r"/proc/", "reads /proc", "high", "the harness"),
    (r"\bcudaStreamCreate\w*|\bcudaStream_t\s+\w+\s*;|getStreamFromPool",
     "creates a CUDA stream", "high", "extra streams"),
    (r"\bstd::thread\b|\bpthread_create\b|\bstd::async\b", "starts a native thread", "high",
     "threads"),
    (r"\bcudaLaunchHostFunc\b|\bcudaStreamAddCallback\b", "host callbacks", "high",
     "deferred work"),
    (r"\bfork\s*\(|\bexecv\w*\s*\(|\bsystem\s*\(", "starts a process", "high", "processes"),
    (r"\bdlopen\b|\bdlsym\b", "loads native code", "medium", "raw memory and native calls"),
    (r"\bgetenv\b", "reads the environment", "medium", "environment"),
    (r"\bcudaGraph\w*", "CUDA graphs", "medium", "deferred work"),
    (r"\b__half\b|\b__nv_bfloat16\b|\b__float2half\w*|\b__float2bfloat16\w*|\bhalf2\b",
     "half-precision arithmetic", "low", "precision"),
    (r"\bwmma::|\bmma\.sync|\bwgmma\b|\btf32\b", "tensor-core (reduced precision) math", "low",
     "precision"),
    (r"\bclock64\s*\(|\b%globaltimer\b", "reads device clocks", "medium", "timers"),
]

_GLOBAL_KERNEL = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?(?:void\s+)"
    r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)"
)
# A kernel's decorators are its backend's (evaluator/backends: `decorators`, by the full name they
# resolve to), so a new language is named here without an edit. Triton's are also any name under
# `triton.` and a bare jit, autotune or heuristics, once no other backend's decorator matched
# (Helion's `jit`, imported bare, is Helion's).
_TRITON = "triton"
_TRITON_BARE = ("jit", "autotune", "heuristics")
_PATCHABLE_ROOTS = ("torch", "time", "evaluator", "evaluation", "sys", "builtins", "gc", "os",
                    "statistics", "triton", "numpy", "math", "random")


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Visitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}  # local name -> full dotted module/object name
        self.imports: set[str] = set()
        self.calls: dict[str, int] = {}
        self.findings: dict[tuple[str, str], dict[str, Any]] = {}
        # Read from the table at each report, not at import: what it holds is what is named.
        self.decorators: dict[str, tuple[str, ...]] = {
            b.name: b.decorators for b in backends.BACKENDS.values() if b.decorators}
        self.language_kernels: dict[str, list[str]] = {lang: [] for lang in self.decorators}
        self.functions: dict[str, int] = {}
        self.loaded_names: dict[str, int] = {}
        self.strings: list[tuple[str, int]] = []
        self.load_inline_functions: list[str] = []
        self.tensor_subclasses: list[str] = []

    # --- helpers ------------------------------------------------------------------------------
    def resolve(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        full = self.aliases.get(head)
        if full is None:
            return dotted
        return f"{full}.{rest}" if rest else full

    def add(self, pattern: str, detail: str, line: int, severity: str, category: str) -> None:
        key = (pattern, detail)
        entry = self.findings.get(key)
        if entry is None:
            if len(self.findings) >= MAX_FINDINGS:
                return
            self.findings[key] = {"pattern": pattern, "detail": detail, "line": line,
                                  "severity": severity, "category": category, "count": 1}
        else:
            entry["count"] += 1

    # --- visitors -----------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.imports.add(alias.name)
            local = alias.asname or alias.name.split(".")[0]
            self.aliases[local] = alias.name if alias.asname else alias.name.split(".")[0]
            self._note_module(alias.name, node.lineno)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.add("relative import", f"from {'.' * node.level}{module} import ...",
                     node.lineno, "high", "the harness")
        self.imports.add(module)
        self._note_module(module, node.lineno)
        for alias in node.names:
            full = f"{module}.{alias.name}" if module else alias.name
            self.aliases[alias.asname or alias.name] = full
            if full in CALLS:
                severity, category = CALLS[full]
                self.add(full, f"from {module} import {alias.name}", node.lineno, severity,
                         category)
        self.generic_visit(node)

    def _note_module(self, name: str, line: int) -> None:
        top = name.split(".")[0]
        if name.startswith("concurrent.futures"):
            top = "concurrent"
        if top in MODULES:
            severity, category = MODULES[top]
            self.add(f"import {top}", f"import {name}", line, severity, category)

    def visit_Call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        if name:
            full = self.resolve(name)
            self.calls[full] = self.calls.get(full, 0) + 1
            if full in CALLS:
                severity, category = CALLS[full]
                self.add(full, f"{full}()", node.lineno, severity, category)
            if full == "setattr" and node.args:
                target = _dotted(node.args[0])
                if target and self.resolve(target).split(".")[0] in _PATCHABLE_ROOTS:
                    self.add("monkeypatch", f"setattr({self.resolve(target)}, ...)",
                             node.lineno, "high", "monkeypatching")
            if full.endswith("load_inline"):
                for kw in node.keywords:
                    if kw.arg == "functions" and isinstance(kw.value, (ast.List, ast.Tuple)):
                        for elt in kw.value.elts:
                            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                                self.load_inline_functions.append(elt.value)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in ATTRIBUTES:
            severity, category = ATTRIBUTES[node.attr]
            self.add(node.attr, f".{node.attr}", node.lineno, severity, category)
        name = _dotted(node)
        if name and isinstance(node.ctx, ast.Load):
            full = self.resolve(name)
            if full in ("sys.modules", "os.environ"):
                severity, category = CALLS[full]
                self.add(full, full, node.lineno, severity, category)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.loaded_names[node.id] = self.loaded_names.get(node.id, 0) + 1
            if node.id == "__builtins__":
                self.add("__builtins__", "__builtins__", node.lineno, "high", "patching builtins")
        self.generic_visit(node)

    def _check_targets(self, targets: list[ast.expr], line: int) -> None:
        for target in targets:
            elts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
            for elt in elts:
                if isinstance(elt, (ast.Attribute, ast.Subscript)):
                    base = elt.value if isinstance(elt, ast.Subscript) else elt
                    name = _dotted(base)
                    if not name:
                        continue
                    full = self.resolve(name)
                    root = full.split(".")[0]
                    if root in _PATCHABLE_ROOTS and "." in full or (
                        isinstance(elt, ast.Subscript) and root in ("sys", "builtins")
                    ):
                        if full.startswith("torch.backends") and full.endswith(
                            ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                             "allow_bf16_reduced_precision_reduction")
                        ):
                            self.add("precision", f"{full} = ...", line, "high", "precision")
                        elif full.startswith("torch.backends"):
                            self.add("backend setting", f"{full} = ...", line, "low",
                                     "settings")
                        else:
                            self.add("monkeypatch", f"{full} = ...", line, "high",
                                     "monkeypatching")

    def visit_Assign(self, node: ast.Assign) -> None:
        self._check_targets(node.targets, node.lineno)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_targets([node.target], node.lineno)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self._check_targets(node.targets, node.lineno)
        self.generic_visit(node)

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions[node.name] = node.lineno
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            name = _dotted(target)
            if name is None:
                continue
            full = self.resolve(name)
            lang = next((lang for lang, names in self.decorators.items() if full in names), None)
            if lang is None and (name in _TRITON_BARE or name.startswith("triton.")
                                 or full.startswith("triton.")):
                lang = _TRITON
            kernels = self.language_kernels.setdefault(lang, []) if lang else None
            if kernels is not None and node.name not in kernels:
                kernels.append(node.name)
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.add(node.name, f"defines {node.name}", node.lineno, "high", "lazy outputs")
        if node.name == "__del__":
            self.add("__del__", "defines __del__", node.lineno, "medium", "deferred work")
        self.generic_visit(node)

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            name = _dotted(base)
            if name and self.resolve(name) in ("torch.Tensor", "torch._C.TensorBase",
                                               "torch.overrides.TorchFunctionMode",
                                               "torch.utils._python_dispatch.TorchDispatchMode"):
                self.tensor_subclasses.append(node.name)
                self.add("tensor subclass", f"class {node.name}({self.resolve(name)})",
                         node.lineno, "high", "lazy outputs")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and node.value:
            self.strings.append((node.value, getattr(node, "lineno", 0)))
        self.generic_visit(node)


def _constants(tree: ast.Module) -> dict[str, Any]:
    """Module-level `NAME = <literal>` assignments (ints, floats, strings, tuples of them)."""
    out: dict[str, Any] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                try:
                    out[target.id] = ast.literal_eval(stmt.value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    # Not a literal (e.g. `N = 2048 * 2`): fold simple arithmetic below.
                    value = _fold(stmt.value)
                    if value is not None:
                        out[target.id] = value
    return out


def _fold(node: ast.AST) -> int | float | None:
    """Evaluate `+ - * // / **` over number literals (KernelBench writes `N = 2048 * 2`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(
        node.value, bool
    ):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _fold(node.operand)
        return -v if v is not None else None
    if isinstance(node, ast.BinOp):
        a, b = _fold(node.left), _fold(node.right)
        if a is None or b is None:
            return None
        try:
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.FloorDiv):
                return a // b
            if isinstance(node.op, ast.Div):
                return a / b
            if isinstance(node.op, ast.Pow) and abs(b) <= 64:
                return a**b
        except (ZeroDivisionError, OverflowError):
            return None
    return None


def _kernel_usage(v: _Visitor) -> dict[str, Any]:
    """Kernels the source defines, and whether anything refers to them after defining them."""
    cuda_kernels: list[str] = []
    for text, _line in v.strings:
        for m in _GLOBAL_KERNEL.finditer(text):
            if m.group(1) not in cuda_kernels:
                cuda_kernels.append(m.group(1))
    languages: dict[str, list[str]] = {}
    for lang, names in v.language_kernels.items():
        languages[lang] = list(names)
        languages[f"{lang}_never_referenced"] = [k for k in names if not v.loaded_names.get(k)]
    exported = list(dict.fromkeys(v.load_inline_functions))
    uncalled_exports = [f for f in exported if not any(
        name.endswith("." + f) or name == f for name in v.calls
    )]
    return {
        "cuda": cuda_kernels,
        "load_inline_functions": exported,
        "load_inline_functions_never_called": uncalled_exports,
        **languages,  # "triton", "triton_never_referenced", "helion", ...
    }


def analyze(source: str, *, reference_source: str | None = None,
            backend: str | None = None) -> dict[str, Any]:
    """The static report of `source` (a dict, JSON-ready)."""
    report: dict[str, Any] = {"version": REPORT_VERSION, "backend": backend,
                              "lines": source.count("\n") + 1, "bytes": len(source.encode())}
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        report.update({"parse_error": f"{type(exc).__name__}: {exc}"[:500], "risk": "unknown",
                       "findings": [], "imports": [], "calls": {}, "kernels": {}})
        return report
    v = _Visitor()
    v.visit(tree)
    for text, line in v.strings:
        for regex, label, severity, category in TEXT_PATTERNS:
            if re.search(regex, text):
                v.add(f"text: {label}", label, line, severity, category)
    kernels = _kernel_usage(v)
    claimed = backends.BACKENDS.get(backend or "")
    if claimed is not None and claimed.claims_kernels:
        if not claimed.kernel_names(kernels):
            v.add("backend", f"claims {backend} but defines no {backend} kernel", 1, "high",
                  "pytorch fallback")
        for lang in v.language_kernels:
            for name in kernels[f"{lang}_never_referenced"]:
                v.add("backend", f"{lang} kernel {name} is never referenced", v.functions.get(
                    name, 1), "high", "pytorch fallback")
        for name in kernels["load_inline_functions_never_called"]:
            v.add("backend", f"extension function {name} is never called", 1, "medium",
                  "pytorch fallback")

    changed: dict[str, Any] = {}
    redefined: list[str] = []
    if reference_source is not None:
        try:
            ref_tree = ast.parse(reference_source)
        except (SyntaxError, ValueError):
            ref_tree = None
        if ref_tree is not None:
            ref_consts = _constants(ref_tree)
            cand_consts = _constants(tree)
            for name, value in cand_consts.items():
                if name in ref_consts and ref_consts[name] != value:
                    changed[name] = {"reference": ref_consts[name], "candidate": value}
            defined = {s.name for s in tree.body if isinstance(s, (ast.FunctionDef,
                                                                   ast.ClassDef))}
            redefined = sorted(defined & {"get_inputs", "get_init_inputs", "Model"})
    for name, values in changed.items():
        # The reference's value stays out of the text (without_reference drops it).
        v.add("problem size", f"{name} = {values['candidate']!r}, not the reference's value", 1,
              "high", "problem sizes")

    findings = sorted(v.findings.values(),
                      key=lambda f: (-SEVERITY_ORDER[f["severity"]], f["line"]))
    risk = max((f["severity"] for f in findings), key=SEVERITY_ORDER.__getitem__, default="none")
    top_calls = dict(sorted(v.calls.items(), key=lambda kv: (-kv[1], kv[0]))[:60])
    report.update({
        "risk": risk,
        "findings": findings,
        "imports": sorted(i for i in v.imports if i),
        "calls": top_calls,
        "kernels": kernels,
        "tensor_subclasses": v.tensor_subclasses,
        "problem_constants_changed": changed,
        "redefines": redefined,
    })
    return report


# A finding of a report made before the reference's value left its text: "N = 1 (reference: 8)".
_QUOTED_REFERENCE = re.compile(r"\s*\(reference: .*\)\s*$", re.DOTALL)


def without_reference(report: dict[str, Any]) -> dict[str, Any]:
    """The report (as stored: with the judge's checks beside it) without what it quotes of the
    reference: each changed constant keeps the candidate's value alone, in the report and in
    the problem_size_changed flag's details; a finding stored with the reference's value in its
    text loses it."""
    out = dict(report)
    if isinstance(out.get("problem_constants_changed"), dict):
        out["problem_constants_changed"] = _candidate_values(out["problem_constants_changed"])
    if isinstance(out.get("findings"), list):
        out["findings"] = [
            {**f, "detail": _QUOTED_REFERENCE.sub("", str(f.get("detail", "")))}
            if isinstance(f, dict) and f.get("pattern") == "problem size" else f
            for f in out["findings"]]
    checks = out.get("checks")
    details = checks.get("flag_details") if isinstance(checks, dict) else None
    sizes = details.get("problem_size_changed") if isinstance(details, dict) else None
    if isinstance(sizes, dict) and isinstance(sizes.get("constants"), dict):
        sizes = {**sizes, "constants": _candidate_values(sizes["constants"])}
        out["checks"] = {**checks, "flag_details": {**details, "problem_size_changed": sizes}}
    return out


def _candidate_values(changed: dict[str, Any]) -> dict[str, Any]:
    return {name: ({k: v for k, v in values.items() if k != "reference"}
                   if isinstance(values, dict) else values)
            for name, values in changed.items()}
