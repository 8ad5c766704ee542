"""Reading KernelBench problems from disk as text: a problem folder or the dataset's files.

Nothing here runs a problem: a reference is checked with `ast` only. Reference code runs on
runners, in the sandbox, like kernels (gpu_runner/curation.py).
"""

import ast
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

FILENAME_PATTERN = re.compile(r"^(?P<number>\d+)_(?P<name>.+)\.py$")
LEVEL_FOLDER_PATTERN = re.compile(r"^level(?P<level>\d+)$")
DATASET_SUFFIXES = (".parquet", ".jsonl", ".json")
DATASET_COLUMNS = ("code", "level", "name", "problem_id")
MAX_SOURCE_BYTES = 1024 * 1024  # KernelBench's largest reference is a few KB
REQUIRED = (
    ("Model", "no Model class"),
    ("get_inputs", "no get_inputs function"),
    ("get_init_inputs", "no get_init_inputs function"),
)


class ImportSourceError(ValueError):
    """The path given to an import cannot be read as a problem folder or dataset file."""


@dataclass
class Candidate:
    """One problem as read from disk, or the reason it cannot be imported."""

    label: str  # what a person recognises it by: "level1/19_ReLU.py", "x.jsonl row 3"
    level: int | None = None
    number: int | None = None
    name: str = ""
    source: str = ""
    origin: str = ""
    description: str = ""
    error: str = ""


def top_level_names(tree: ast.Module) -> dict[str, str]:
    """Names a module defines at its top level, with what defines them (class, def, ...)."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = "class"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = "def"
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = "assign"
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = "assign"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = "import"
    return names


def check_reference(source: str) -> tuple[str, str]:
    """(error, description): error is "" for a well-formed KernelBench reference.

    The description is the Model class's docstring, when it has one.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        return f"syntax error on line {error.lineno}: {error.msg}", ""
    except ValueError as error:  # null bytes
        return f"cannot be parsed: {error}", ""
    names = top_level_names(tree)
    missing = [message for name, message in REQUIRED if name not in names]
    if missing:
        return ", ".join(missing), ""
    description = ""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            description = short_description(ast.get_docstring(node) or "")
    return "", description


# A problem's description, as its pages show it: the docstring's first paragraph, at most this
# many characters.
DESCRIPTION_MAX_CHARS = 300
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Inputs|Outputs)\s*:", re.I)


def short_description(docstring: str) -> str:
    """The first paragraph of a docstring on one line (up to a blank line or an "Args:"
    section), cut to DESCRIPTION_MAX_CHARS with an ellipsis."""
    lines = []
    for line in docstring.strip().splitlines():
        if not line.strip() or _SECTION.match(line):
            if lines:
                break
            continue
        lines.append(line.strip())
    text = " ".join(lines)
    if len(text) > DESCRIPTION_MAX_CHARS:
        text = text[: DESCRIPTION_MAX_CHARS - 1].rsplit(" ", 1)[0].rstrip(" ,;:") + "…"
    return text


# Tags read from a problem's name ("Conv3d_GroupNorm_Mean_Softplus"): what kind of operations
# it has. Each word of the name, lower-cased, is looked up by its start (conv3d -> conv), then
# whole.
_TAG_PREFIXES = (
    ("convtranspose", "convolution"),
    ("conv", "convolution"),
    ("matmul", "matmul"),
    ("gemm", "matmul"),
    ("bmm", "matmul"),
    ("logsoftmax", "softmax"),
    ("softmax", "softmax"),
    ("maxpool", "pooling"),
    ("avgpool", "pooling"),
    ("adaptiveavgpool", "pooling"),
    ("attention", "attention"),
)
_TAG_WORDS = {
    "linear": "matmul", "matrix": "matmul", "einsum": "matmul",
    "relu": "activation", "leakyrelu": "activation", "gelu": "activation",
    "sigmoid": "activation", "tanh": "activation", "swish": "activation",
    "softplus": "activation", "mish": "activation", "elu": "activation",
    "selu": "activation", "hardtanh": "activation", "hardsigmoid": "activation",
    "hardswish": "activation", "softsign": "activation", "silu": "activation",
    "batchnorm": "normalization", "layernorm": "normalization", "groupnorm": "normalization",
    "instancenorm": "normalization", "rmsnorm": "normalization", "norm": "normalization",
    "l1norm": "normalization", "l2norm": "normalization",
    "sum": "reduction", "mean": "reduction", "max": "reduction", "min": "reduction",
    "argmax": "reduction", "argmin": "reduction", "prod": "reduction", "cumsum": "reduction",
    "cumprod": "reduction", "logsumexp": "reduction", "reduction": "reduction",
    "add": "elementwise", "multiply": "elementwise", "subtract": "elementwise",
    "divide": "elementwise", "scale": "elementwise", "scaling": "elementwise",
    "clamp": "elementwise", "biasadd": "elementwise", "residualadd": "elementwise",
    "dropout": "elementwise", "pool": "pooling", "pooling": "pooling",
}


def name_tags(name: str) -> list[str]:
    """The kinds of operations a problem's name says it has, sorted: "19_ReLU" ->
    ["activation"], "Conv2d_GroupNorm_Mean" -> ["convolution", "normalization", "reduction"].
    Names ending in "Loss" are a loss function."""
    tags = set()
    words = [word.lower() for word in re.split(r"[^A-Za-z0-9]+", name) if word]
    for lower, following in zip(words, [*words[1:], ""], strict=True):
        if lower in ("max", "min", "avg", "average") and following.startswith("pool"):
            continue  # "Max_Pooling_2D" is pooling, not a reduction
        if lower.endswith("loss"):
            tags.add("loss")
            continue
        tag = next((t for prefix, t in _TAG_PREFIXES if lower.startswith(prefix)), None)
        tag = tag or _TAG_WORDS.get(lower)
        if tag:
            tags.add(tag)
    return sorted(tags)


def _read_text(path: Path) -> str:
    if path.stat().st_size > MAX_SOURCE_BYTES:
        raise ValueError(f"larger than {MAX_SOURCE_BYTES // 1024} KB")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None


def _finish(candidate: Candidate) -> Candidate:
    if not candidate.error:
        candidate.error, candidate.description = check_reference(candidate.source)
    return candidate


def level_folders(root: Path) -> list[tuple[int, Path]]:
    """The `levelN` folders of a KernelBench checkout (its root, or one level folder itself)."""
    own = LEVEL_FOLDER_PATTERN.match(root.name)
    if own:
        return [(int(own["level"]), root)]
    for base in (root, root / "KernelBench"):
        found = []
        if base.is_dir():
            for child in base.iterdir():
                match = LEVEL_FOLDER_PATTERN.match(child.name)
                if match and child.is_dir():
                    found.append((int(match["level"]), child))
        if found:
            return sorted(found)
    return []


def read_folder(root: Path, levels: set[int] | None = None) -> Iterator[Candidate]:
    for level, folder in level_folders(root):
        if levels and level not in levels:
            continue
        for path in sorted(folder.iterdir(), key=lambda p: p.name):
            if path.suffix != ".py" or not path.is_file():
                continue  # READMEs and the like are not problems
            label = f"{folder.name}/{path.name}"
            match = FILENAME_PATTERN.match(path.name)
            if not match:
                yield Candidate(label=label, error="file name is not <number>_<Name>.py")
                continue
            candidate = Candidate(
                label=label,
                level=level,
                number=int(match["number"]),
                name=match["name"],
                origin=label,
            )
            try:
                candidate.source = _read_text(path)
            except (OSError, ValueError) as error:
                candidate.error = str(error)
            yield _finish(candidate)


def dataset_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if path.suffix in DATASET_SUFFIXES else []
    return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in DATASET_SUFFIXES)


def _rows_from_json(path: Path) -> Iterator[tuple[int, dict | None, str]]:
    """(row number, row, error) from a JSON lines file (or a .json file holding one list)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json" and text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except ValueError as error:
            yield 0, None, f"not valid JSON: {error}"
            return
        for number, row in enumerate(rows, start=1):
            yield number, row, ""
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line), ""
        except ValueError as error:
            yield number, None, f"not valid JSON: {error}"


def _rows_from_parquet(path: Path) -> Iterator[tuple[int, dict | None, str]]:
    try:
        import pyarrow.parquet
    except ImportError:
        raise ImportSourceError(
            f"{path.name}: reading parquet needs the pyarrow package; install it, or convert "
            "the file to JSON lines (one object per line with code, level, name, problem_id)"
        ) from None
    try:
        table = pyarrow.parquet.read_table(path)
    except Exception as error:  # pyarrow raises its own types for a damaged file
        raise ImportSourceError(f"{path.name}: not a readable parquet file: {error}") from None
    for number, row in enumerate(table.to_pylist(), start=1):
        yield number, row, ""


def _level_of(value) -> int:
    # The dataset stores 1..4; split names such as "level_1" are accepted too.
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, int):
        return value
    return int(re.sub(r"^level_?", "", str(value).strip()))


def candidate_from_row(row, *, label: str, origin: str) -> Candidate:
    candidate = Candidate(label=label, origin=origin)
    if not isinstance(row, dict):
        candidate.error = "a row must be an object with code, level, name, problem_id"
        return candidate
    missing = [column for column in DATASET_COLUMNS if row.get(column) in (None, "")]
    if missing:
        candidate.error = "missing " + ", ".join(missing)
        return candidate
    try:
        candidate.level = _level_of(row["level"])
        candidate.number = int(row["problem_id"])
    except (TypeError, ValueError):
        candidate.error = "level and problem_id must be whole numbers"
        return candidate
    if candidate.level < 1 or candidate.number < 0:
        candidate.error = "level and problem_id must be positive"
        return candidate
    # The dataset's name is the file name ("19_ReLU.py"); older copies drop the number or ".py".
    name = str(row["name"]).strip().removesuffix(".py")
    name = name.removeprefix(f"{candidate.number}_")
    if not name or "/" in name:
        candidate.error = f"unusable name {row['name']!r}"
        return candidate
    candidate.name = name
    candidate.label = f"level{candidate.level}/{candidate.number}_{name} ({label})"
    if not isinstance(row["code"], str):
        candidate.error = "code must be text"
        return candidate
    candidate.source = row["code"]
    return _finish(candidate)


def read_dataset(path: Path, levels: set[int] | None = None) -> Iterator[Candidate]:
    files = dataset_files(path)
    if not files:
        raise ImportSourceError(f"{path.name}: no .parquet, .jsonl or .json files")
    for file in files:
        reader = _rows_from_parquet if file.suffix == ".parquet" else _rows_from_json
        try:
            rows = list(reader(file))
        except UnicodeDecodeError:
            yield Candidate(label=file.name, error="not UTF-8 text")
            continue
        for number, row, error in rows:
            label = f"{file.name} row {number}"
            if error:
                yield Candidate(label=label, error=error)
                continue
            candidate = candidate_from_row(row, label=label, origin=f"{file.name}#{number}")
            if levels and candidate.level is not None and candidate.level not in levels:
                continue
            yield candidate


def read_problems(path: Path, levels: set[int] | None = None) -> Iterator[Candidate]:
    """Every problem under `path`: a KernelBench folder, or the dataset's files."""
    if not path.exists():
        raise ImportSourceError(f"{path} does not exist")
    if path.is_dir() and level_folders(path):
        yield from read_folder(path, levels)
        return
    if dataset_files(path):
        yield from read_dataset(path, levels)
        return
    raise ImportSourceError(
        f"{path} holds no KernelBench level folders (level1/, level2/, ...) and no dataset "
        "files (.parquet, .jsonl, .json)"
    )
