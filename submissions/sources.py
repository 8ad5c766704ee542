"""What a kernel source must be before it is stored: UTF-8 text within the size limit, not
empty, and Python that defines ModelNew at its top level. Checked on upload, without running
anything (the evaluator runs it, sandboxed, on a runner)."""

import ast
import re
import warnings

from django.conf import settings

from submissions.errors import SubmissionError

_FILENAME_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def clean_filename(name: str) -> str:
    """An uploaded file's name without control characters (newlines, terminal escapes).

    It is kept otherwise as sent: pages escape it, and download headers quote it.
    """
    return _FILENAME_CONTROL.sub("", name or "").strip()[:255]


def decode_source(raw: bytes) -> str:
    """An uploaded file's bytes as text: within the size limit and UTF-8, else SubmissionError
    (too_large, not_utf8)."""
    if len(raw) > settings.SUBMISSION_MAX_BYTES:
        raise SubmissionError(
            f"The source is {len(raw)} bytes; the limit is {settings.SUBMISSION_MAX_BYTES}.",
            code="too_large",
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SubmissionError(
            f"The source is not UTF-8 text (byte {error.start} is invalid).", code="not_utf8"
        ) from None


def check_source_text(source: str) -> None:
    """Refuse a source that is too large, empty, or not text (SubmissionError: too_large,
    empty, not_text, not_utf8); check_kernel_source then reads it as Python."""
    try:
        size = len(source.encode("utf-8"))
    except UnicodeEncodeError as error:
        # JSON can carry lone surrogates ("\ud800") that decode to a str but are not UTF-8.
        raise SubmissionError(
            f"The source is not UTF-8 text (character {error.start} is invalid).",
            code="not_utf8",
        ) from None
    if size > settings.SUBMISSION_MAX_BYTES:
        raise SubmissionError(
            f"The source is {size} bytes; the limit is {settings.SUBMISSION_MAX_BYTES}.",
            code="too_large",
        )
    if not source.strip():
        raise SubmissionError("The source is empty.", code="empty")
    if "\x00" in source:
        raise SubmissionError("The source contains a NUL byte.", code="not_text")


# The name the evaluator loads from a kernel's module and calls with the problem's init inputs.
MODEL_NEW = "ModelNew"
# Blocks whose bodies are scopes of their own: a ModelNew bound in them is not the module's.
_OWN_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


class SourceError(SubmissionError):
    """The source is not Python defining ModelNew; `line` is where (1-based), when known."""

    def __init__(self, message: str, *, code: str, line: int | None = None) -> None:
        super().__init__(message, code=code)
        self.line = line


def _module_bindings(tree: ast.Module) -> set[str]:
    """The names the module's own scope binds: classes, defs, assignments, imports, walrus,
    loop and `with` targets, at any depth of if/try/for/with, not inside a def or class body."""
    names: set[str] = set()
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, _OWN_SCOPES):
            if not isinstance(node, ast.Lambda):
                names.add(node.name)
                pending.extend(node.decorator_list)  # evaluated in the module's scope
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias) and node.name != "*":
            names.add(node.asname or node.name.split(".")[0])
        pending.extend(ast.iter_child_nodes(node))
    return names


def _made_dynamically(tree: ast.Module) -> bool:
    """ModelNew bound in a way a parse cannot follow, but named: `global ModelNew` in a
    function, `module.ModelNew = ...`, `globals()["ModelNew"] = ...`, `setattr(m, "ModelNew",
    ...)`, or `exec` of a source with `class ModelNew`. Given the benefit of the doubt: the
    evaluator still says compile_error when ModelNew is missing after all."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Global) and MODEL_NEW in node.names:
            return True
        stored = isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
        if stored and node.attr == MODEL_NEW:
            return True
        text = node.value if isinstance(node, ast.Constant) else None
        if isinstance(text, str) and (text == MODEL_NEW or f"class {MODEL_NEW}" in text):
            return True
    return False


def check_kernel_source(source: str) -> None:
    """Refuse at once a source that is not valid Python or defines no ModelNew.

    It is parsed with `ast`, never compiled to code or run (the evaluator does that, sandboxed,
    on a runner). Every backend's kernel is such a Python file: torch, or CUDA and C++ through
    load_inline, or Triton. SourceError (code syntax_error, with the line; or no_model_new).
    """
    try:
        with warnings.catch_warnings():
            # Invalid escape sequences and the like warn at parse time; the evaluator's
            # interpreter decides about those, not the upload.
            warnings.simplefilter("ignore")
            tree = ast.parse(source, filename="<submission>")
    except SyntaxError as error:
        line = error.lineno
        where = f"line {line}" if line else "an unknown line"
        if line and error.offset:
            where += f", column {error.offset}"
        text = (error.text or "").strip()
        quoted = f": {text[:120]}" if text else ""
        raise SourceError(
            f"The source is not valid Python: {error.msg} ({where}){quoted}",
            code="syntax_error",
            line=line,
        ) from None
    except (RecursionError, MemoryError):
        raise SourceError(
            "The source is nested too deeply to parse.", code="syntax_error"
        ) from None
    bound = _module_bindings(tree)
    if MODEL_NEW in bound or _made_dynamically(tree):
        return
    hint = (
        " It defines Model, the reference's name: name your class ModelNew."
        if "Model" in bound
        else ""
    )
    raise SourceError(
        "The source defines no ModelNew: the evaluator builds ModelNew(*get_init_inputs()) "
        "from the file, so define `class ModelNew(nn.Module)` at its top level (one inside a "
        f"function or class does not count).{hint}",
        code="no_model_new",
    )

