"""docs/configuration.md names every environment variable the project reads (issue 40).

The scan is text, not an import: regular expressions over the project's own Python files (not
.venv, tests, node_modules, var or hidden folders), the shell scripts and the Makefile. What it
counts as a read:

- `os.environ.get("X")`, `os.environ["X"]` (not an assignment), `os.environ.pop("X")`,
  `"X" in os.environ`, `os.getenv("X")`;
- the settings' helpers `env("X")`, `env_bool`, `env_int`, `env_list`, and the harness's
  `_env_limit("X")`;
- a module constant that names one, `SOMETHING_ENV = "X"` (`jail.MODE_ENV = "KB_SANDBOX"`);
- in scripts/*.sh, `${X:-default}` (and `:+`, `:?`, `:=`); in the Makefile, `X ?= default`.

A variable written here and read by a library (`os.environ.setdefault("TRITON_CACHE_DIR")`) is
not a read of ours; docs/configuration.md still lists the ones the harness sets.
"""

import functools
import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "configuration.md"
SKIPPED_FOLDERS = {"tests", "node_modules", "var", "build", "dist", "__pycache__"}

NAME = r"([A-Z][A-Z0-9_]*)"
QUOTED = rf"""["']{NAME}["']"""
PYTHON_READS = [
    re.compile(rf"\benviron\.(?:get|pop)\(\s*{QUOTED}"),
    re.compile(rf"\benviron\[\s*{QUOTED}\s*\](?!\s*=[^=])"),
    re.compile(rf"{QUOTED}\s+(?:not\s+)?in\s+os\.environ\b"),
    re.compile(rf"\bgetenv\(\s*{QUOTED}"),
    re.compile(rf"\b(?:env|env_bool|env_int|env_list|_env_limit)\(\s*{QUOTED}"),
    re.compile(rf"^\s*[A-Z][A-Z0-9_]*_ENV\s*=\s*{QUOTED}", re.MULTILINE),
]
SHELL_READ = re.compile(rf"\$\{{{NAME}:[-+?=]")
MAKE_READ = re.compile(rf"^{NAME}\s*\?=", re.MULTILINE)


def _python_files():
    """The project's Python files; skipped folders are never entered (.venv alone is large)."""
    for folder, subfolders, files in os.walk(REPO):
        subfolders[:] = [name for name in subfolders
                         if not name.startswith(".") and name not in SKIPPED_FOLDERS]
        yield from (Path(folder) / name for name in files if name.endswith(".py"))


@functools.cache
def environment_reads() -> dict[str, set[str]]:
    """Each variable the project reads -> the files that read it (paths from the repository)."""
    found: dict[str, set[str]] = {}

    def add(names, path):
        for name in names:
            found.setdefault(name, set()).add(str(path.relative_to(REPO)))

    for path in _python_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for pattern in PYTHON_READS:
            add(pattern.findall(text), path)
    for path in sorted((REPO / "scripts").glob("*.sh")):
        add(SHELL_READ.findall(path.read_text()), path)
    makefile = REPO / "Makefile"
    add(MAKE_READ.findall(makefile.read_text()), makefile)
    return found


def test_the_scan_finds_reads_of_every_kind():
    """Guards the scan itself: a broken pattern would let the next test pass on nothing."""
    found = environment_reads()
    for name, where in {
        "SECRET_KEY": "kbsite/settings.py",  # env()
        "DB_POOL": "kbsite/settings.py",  # env_bool()
        "ALLOWED_HOSTS": "kbsite/settings.py",  # env_list()
        "KB_SANDBOX_MEMORY_MB": "evaluator/config.py",  # _env_limit()
        "KB_BUILD_SLOT_MB": "evaluator/runner/buildcache.py",  # os.environ.get()
        "KB_SANDBOX": "evaluator/runner/jail.py",  # MODE_ENV = "KB_SANDBOX"
        "LLM_MOCK_RESPONSES_FILE": "submissions/runs/llm.py",  # MOCK_FILE_ENV = ...
        "KB_TOKEN": "kbcli/config.py",
        "KB_PG_DB": "scripts/scaled_services.sh",  # ${KB_PG_DB:-kbsite}
        "HARDWARE": "Makefile",  # HARDWARE ?= cpu
    }.items():
        assert where in found.get(name, ()), f"the scan missed {name} in {where}"
    # worker.py only assigns it (os.environ["TORCH_EXTENSIONS_DIR"] = ...): not a read.
    assert "evaluator/worker/base.py" not in found.get("TORCH_EXTENSIONS_DIR", ())


def test_every_environment_variable_the_code_reads_is_in_docs_configuration():
    """Each variable the code reads is named in docs/configuration.md (a row of its tables, or the
    harness's own list, or the standard tools' line)."""
    doc = DOC.read_text() if DOC.exists() else ""
    missing = {
        name: sorted(files)
        for name, files in sorted(environment_reads().items())
        if not re.search(rf"(?<![A-Za-z0-9_]){name}(?![A-Za-z0-9_])", doc)
    }
    assert not missing, (
        f"{len(missing)} environment variable(s) the code reads are not in docs/configuration.md; "
        "add each to its table (default, who reads it, what it does):\n"
        + "\n".join(f"  {name}  (read in {', '.join(files)})" for name, files in missing.items())
    )
