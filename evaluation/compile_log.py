"""Compiler output a person can read: plain Python, no Django (pages and the API call it).

A failed build's log is long and written for the machine it ran on: ninja's command lines full of
the runner's virtualenv, interpreter and build-folder paths, warnings the harness and torch emit
while loading, and the compiler's error somewhere in the middle, about a generated file
(`cuda.cu`, `main.cpp`) the submitter never wrote. Three pure functions make it readable:

- `scrub_paths`: host paths replaced by placeholders (<venv>, <python>, <build>, <cuda>, <home>,
  <tmp>); the submitted file is just `candidate.py`.
- `drop_harness_warnings`: Python warnings raised from any file but the submitted one (a torch
  FutureWarning in the loader is not the submitter's output).
- `first_error`: the compiler's first error, with the line of the submitted file it comes from
  where the generated file's line maps onto a string passed to `load_inline`.
"""

from __future__ import annotations

import ast
import re

CANDIDATE_FILE = "candidate.py"  # the worker's name for the submitted file

# load_inline writes its sources joined by newlines after these implicit headers
# (torch.utils.cpp_extension.load_inline): the generated file's line n is line
# n - len(headers) of the joined sources.
_INLINE_FILES = {
    "cpp_sources": ("main.cpp", 1),  # '#include <torch/extension.h>'
    "cuda_sources": ("cuda.cu", 3),  # torch/types.h, cuda.h, cuda_runtime.h
}

# A host path: a run of these characters from a "/" that no word, path or placeholder character
# stands before. Matched greedily, each character once: the log is the candidate's to fill, so
# nothing here may take more than linear time (a lazy pattern over "/a/a/a..." would not).
_PATH_CHARS = r"[^\s\"'`()\[\]{}<>,;=]"
_PATH = re.compile(rf"(?<![\w>.~-])/{_PATH_CHARS}+")
_PY_VERSION = re.compile(r"python3[\d.]*$")
_BUILD_FILES = ("main.cpp", "cuda.cu", "build.ninja")
_TMP_ROOTS = (("tmp",), ("var", "tmp"))
# Where ninja and torch name the extension's build folder: the text just before a path, or
# just after it.
_BUILD_DIR_BEFORE = ("Creating extension directory ", "Emitting ninja build file ", "-c ")
_BUILD_DIR_AFTER = " as PyTorch extensions root"

_WARNING_LINE = re.compile(r"^(?P<path>\S+?\.py):\d+: (?P<category>\w*Warning): ")

_NVCC_ERROR = re.compile(
    r"^(?P<file>[^\s()]+)\((?P<line>\d+)\): (?:catastrophic )?error: (?P<message>.+)$"
)
_GCC_ERROR = re.compile(
    r"^(?P<file>[^\s:]+):(?P<line>\d+):(?:(?P<column>\d+):)? (?:fatal )?error: (?P<message>.+)$"
)
_PY_FRAME = re.compile(
    r'File "(?P<file>[^"]*' + re.escape(CANDIDATE_FILE) + r')", line (?P<line>\d+)'
)
_PY_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception)): (?P<message>.+)$")
_ANY_ERROR = re.compile(r"\berror\b", re.IGNORECASE)
_NOT_THE_ERROR = ("ninja: build stopped", "Error building extension", "error detected in")


def scrub_paths(text: str, *, known: dict[str, str] | None = None) -> str:
    """`text` with host paths replaced by placeholders. `known`: placeholder -> a path this
    host knows (its virtualenv, its build cache), replaced first, longest first."""
    if not text:
        return text or ""
    replacements: list[tuple[str, str]] = []
    for placeholder, path in (known or {}).items():
        path = str(path or "").rstrip("/")
        if len(path) > 1:
            replacements.append((path, placeholder))
    for build_dir in _build_dirs(text):
        replacements.append((build_dir, "<build>"))
    for path, placeholder in sorted(set(replacements), key=lambda item: -len(item[0])):
        text = text.replace(path, placeholder)
    return _PATH.sub(lambda match: _scrub_path(match.group(0)), text)


def _build_dirs(text: str) -> list[str]:
    """The extension's build folders that torch's and ninja's lines name."""
    found = []
    for match in _PATH.finditer(text):
        path = match.group(0).rstrip("./")
        before = text[max(match.start() - 40, 0):match.start()]
        after = text[match.end():match.end() + len(_BUILD_DIR_AFTER)]
        build_file = path.endswith(_BUILD_FILES)
        if build_file and before.endswith(_BUILD_DIR_BEFORE):
            found.append(path.rsplit("/", 1)[0])
        elif after == _BUILD_DIR_AFTER or before.endswith(_BUILD_DIR_BEFORE[:2]):
            found.append(path)
    return [path for path in found if path.count("/") > 1]


def _scrub_path(path: str) -> str:
    """One absolute path as a placeholder and what the reader needs of it (list operations
    over its parts: linear in its length)."""
    parts = path.split("/")  # parts[0] == ""
    names = parts[1:]
    for index, name in enumerate(names):
        if name == CANDIDATE_FILE or (
            name.startswith(CANDIDATE_FILE) and not name[len(CANDIDATE_FILE)].isalnum()
        ):
            return "/".join(names[index:])
    last = names[-1] if names else ""
    if last in _BUILD_FILES or (last.endswith(".o") and len(names) > 1):
        return f"<build>/{last}"
    for index, name in enumerate(names):
        if name in ("site-packages", "dist-packages"):
            return "<venv>/" + "/".join(names[index:])
    for index, name in enumerate(names[:-1]):
        following = names[index + 1]
        if name == "bin" and following.startswith("python"):
            return "/".join(["<python>", *names[index + 2:]])
    for index, name in enumerate(names):
        if name in (".venv", "venv"):
            return "/".join(["<venv>", *names[index + 1:]])
    for index, name in enumerate(names[:-1]):
        if name in ("include", "lib") and _PY_VERSION.match(names[index + 1]):
            return "/".join(["<python>", *names[index:]])
    if len(names) >= 3 and names[:2] == ["usr", "local"] and names[2].startswith("cuda"):
        return "/".join(["<cuda>", *names[3:]])
    if len(names) >= 2 and names[0] == "home":
        return "/".join(["<home>", *names[2:]])
    if names and names[0] == "root":
        return "/".join(["<home>", *names[1:]])
    if any(tuple(names[:len(root)]) == root and len(names) > len(root) for root in _TMP_ROOTS):
        return "<tmp>"
    return path


def drop_harness_warnings(text: str) -> str:
    """`text` without the Python warnings raised from files other than the submitted one (each
    warning's line and the indented source line Python prints under it)."""
    if not text:
        return text or ""
    kept: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        match = _WARNING_LINE.match(line)
        if match:
            skipping = not match.group("path").endswith(CANDIDATE_FILE)
            if skipping:
                continue
        elif skipping and line.startswith((" ", "\t")):
            continue
        else:
            skipping = False
        kept.append(line)
    return "".join(kept)


def readable(text: str, *, known: dict[str, str] | None = None) -> str:
    """A log as a person should read it: no harness warnings, no host paths."""
    return scrub_paths(drop_harness_warnings(text), known=known)


def first_error(log: str, *, source: str = "") -> dict | None:
    """The compiler's first error in `log`: {"message", "file", "line" (in that file),
    "column", "excerpt" (the code line the compiler quotes), "source_line" (the submitted
    file's line, where it maps), "summary" (one line to show)}; None without one.

    nvcc's `file(line): error: ...` and gcc's/clang's `file:line:col: error: ...` first; else a
    Python error in the submitted file (a Triton kernel or plain Python failing to load); else
    the first line that says error.
    """
    if not log:
        return None
    lines = log.splitlines()
    for index, line in enumerate(lines):
        match = _NVCC_ERROR.match(line.strip()) or _GCC_ERROR.match(line.strip())
        if match:
            generated = match.group("file").rsplit("/", 1)[-1]
            number = int(match.group("line"))
            found = {
                "message": match.group("message").strip(),
                "file": generated,
                "line": number,
                "column": int(match.group("column")) if match.groupdict().get("column") else None,
                "excerpt": _excerpt(lines[index + 1:index + 3]),
                "source_line": _submitted_line(source, generated, number),
            }
            return {**found, "summary": _summary(found)}
    frames = [m for line in lines for m in [_PY_FRAME.search(line)] if m]
    exceptions = [m for line in lines for m in [_PY_EXCEPTION.match(line.strip())] if m]
    if frames and exceptions:
        number = int(frames[-1].group("line"))
        found = {
            "message": f"{exceptions[-1].group('type')}: {exceptions[-1].group('message')}",
            "file": CANDIDATE_FILE, "line": number, "column": None, "excerpt": "",
            "source_line": number,
        }
        return {**found, "summary": _summary(found)}
    for line in lines:
        text = line.strip()
        if _ANY_ERROR.search(text) and not any(sign in text for sign in _NOT_THE_ERROR):
            found = {"message": text, "file": None, "line": None, "column": None,
                     "excerpt": "", "source_line": None}
            return {**found, "summary": text}
    return None


def _excerpt(following: list[str]) -> str:
    """The code line a compiler quotes under its error (gcc prefixes it with `  9 | `)."""
    for line in following:
        text = line.rstrip()
        if not text.strip() or set(text.strip()) <= {"^", "~", "|", " "}:
            continue
        return re.sub(r"^\s*\d+\s*\|\s?", "", text).strip()
    return ""


def _summary(found: dict) -> str:
    where = found["file"] or ""
    if found["source_line"] is not None:
        where = f"line {found['source_line']} of your file"
        if found["file"] and found["file"] != CANDIDATE_FILE:
            where += f" ({found['file']} line {found['line']})"
    elif found["line"] is not None:
        where = f"{found['file']} line {found['line']}"
    return f"{where}: {found['message']}" if where else found["message"]


def _submitted_line(source: str, generated: str, number: int) -> int | None:
    """The submitted file's line that became line `number` of the file load_inline generated,
    or None where it does not map (headers, bindings, a source built at run time)."""
    if not source:
        return None
    if generated == CANDIDATE_FILE:
        return number
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    strings = _string_assignments(tree)
    source_lines = source.splitlines()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _called_name(node.func) == "load_inline"):
            continue
        for keyword in node.keywords:
            if keyword.arg not in _INLINE_FILES or _INLINE_FILES[keyword.arg][0] != generated:
                continue
            offset = number - _INLINE_FILES[keyword.arg][1]  # 1-based line in the joined sources
            for literal in _literals(keyword.value, strings):
                count = literal.value.count("\n") + 1
                if offset <= count:
                    mapped = literal.lineno + offset - 1
                    # Only a literal written as is maps line for line (no escapes, no joins).
                    wanted = literal.value.split("\n")[offset - 1].strip()
                    if 0 < mapped <= len(source_lines) and wanted in source_lines[mapped - 1]:
                        return mapped
                    return None
                offset -= count
    return None


def _called_name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _string_assignments(tree: ast.AST) -> dict[str, ast.Constant]:
    found: dict[str, ast.Constant] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(
            node.value.value, str
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, node.value)
    return found


def _literals(value: ast.expr, strings: dict[str, ast.Constant]) -> list[ast.Constant]:
    """The string literals a load_inline argument joins: a literal, a name bound to one, or a
    list of those; [] where it is anything else (then nothing maps)."""
    items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
    out = []
    for item in items:
        if isinstance(item, ast.Name):
            item = strings.get(item.id)
        if not (isinstance(item, ast.Constant) and isinstance(item.value, str)):
            return []
        out.append(item)
    return out
