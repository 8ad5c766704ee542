"""The import contracts in pyproject.toml ([tool.importlinter]): the apps depend downward only,
the evaluator imports no Django and no app, the `kb` client no server code; and only the
evaluator's launcher starts processes or builds the sandbox's command line.

`make lint` runs the same check; running it here puts it in `make test`, which CI runs. The
graph is built without a cache (well under a second), so the test writes nothing to the checkout.
"""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The venv's bin folder: sys.executable itself, not the interpreter it links to.
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def test_the_app_layers_hold_the_import_contract():
    """Slow: lint-imports runs as its own process over the whole source tree."""
    result = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, (
        f"lint-imports exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    )


EVALUATOR = REPO / "evaluator"
LAUNCHER = EVALUATOR / "launcher.py"
# Calls that start a process: subprocess's, and os's own.
PROCESS_STARTERS = {
    "subprocess": {"Popen", "run", "call", "check_call", "check_output", "getoutput",
                   "getstatusoutput"},
    "os": {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "execv",
           "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv",
           "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle"},
}
# Options only bubblewrap's command line carries.
BWRAP_OPTIONS = ("--ro-bind", "--unshare-pid", "--unshare-user", "--seccomp", "--die-with-parent")


def _process_starts(path: Path) -> list[str]:
    import ast

    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        func = node.func if isinstance(node, ast.Call) else None
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.attr in PROCESS_STARTERS.get(func.value.id, ())):
            found.append(f"{path.relative_to(REPO)}:{node.lineno} {func.value.id}.{func.attr}")
        if isinstance(node, ast.ImportFrom) and node.module in PROCESS_STARTERS:
            for alias in node.names:
                if alias.name in PROCESS_STARTERS[node.module]:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} from {node.module} "
                                 f"import {alias.name}")
    return found


def test_only_the_launcher_starts_a_process_in_the_evaluator():
    """Candidate code starts only through evaluator/launcher.py (and so only in the sandbox):
    no other module of the evaluator starts any process at all, so none can start one outside
    it by mistake."""
    found = [hit for path in sorted(EVALUATOR.rglob("*.py")) if path != LAUNCHER
             for hit in _process_starts(path)]
    assert found == [], "processes started outside evaluator/launcher.py:\n" + "\n".join(found)
    assert _process_starts(LAUNCHER), "the launcher starts nothing: the scan is broken"


def test_only_the_launcher_builds_the_sandboxs_command_line():
    """bwrap's options are written in the launcher alone, in the whole project (tests aside)."""
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.split()
    found = []
    for name in tracked:
        path = REPO / name
        if name.startswith("tests/") or path == LAUNCHER or not path.is_file():
            continue
        text = path.read_text()
        found += [f"{name}: {option}" for option in BWRAP_OPTIONS if f'"{option}"' in text]
    assert found == [], "bwrap options outside evaluator/launcher.py:\n" + "\n".join(found)
    assert all(f'"{option}"' in LAUNCHER.read_text() for option in BWRAP_OPTIONS)


MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600


def test_the_evaluator_reads_in_small_pieces():
    """No module of the evaluator over 600 lines and no function over 80: the trusted code is
    read whole by whoever reviews a change to it."""
    import ast

    long_modules, long_functions = [], []
    for path in sorted(EVALUATOR.rglob("*.py")):
        text = path.read_text()
        name = path.relative_to(REPO)
        if text.count("\n") > MAX_MODULE_LINES:
            long_modules.append(f"{name}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long_functions.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    assert long_modules == [], "\n".join(long_modules)
    assert long_functions == [], "\n".join(long_functions)


def _tree_with(tmp_path: Path, planted: dict[str, str]) -> Path:
    """A copy of the source tree (the packages lint-imports reads and its configuration), with
    a line added to each named file."""
    import shutil

    for name in ("pyproject.toml",):
        shutil.copy(REPO / name, tmp_path / name)
    for package in ("kbsite", "accounts", "problems", "evaluation", "submissions", "leaderboard",
                    "competitions", "gpu_runner", "kbcli", "evaluator"):
        shutil.copytree(REPO / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "static",
                                                      "templates"))
    for path, line in planted.items():
        target = tmp_path / path
        target.write_text(target.read_text() + "\n" + line + "\n")
    return tmp_path


import pytest  # noqa: E402


@pytest.mark.parametrize(("path", "line", "contract"), [
    # The issue's own example: before the evaluator was among the root packages, this was
    # still "3 kept".
    ("evaluator/verdicts.py", "import django.db  # noqa", "plain Python and torch"),
    ("evaluator/worker/base.py", "from evaluator.judge import clock  # noqa",
     "worker imports neither"),
    ("evaluator/runner/sandbox.py", "from evaluator.judge import judge  # noqa",
     "runner imports neither"),
    ("evaluator/judge/clock.py", "from evaluator.runner import jail  # noqa",
     "judge never imports the runner"),
    ("submissions/models.py", "from evaluator.judge import timed  # noqa",
     "only the evaluator's public modules"),
])
def test_a_planted_forbidden_import_breaks_its_contract(tmp_path, path, line, contract):
    """Slow: lint-imports runs as its own process over a copy of the source tree with one
    forbidden import planted (the contracts check what they say, not nothing)."""
    tree = _tree_with(tmp_path, {path: line})
    result = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=tree, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0, result.stdout
    broken = result.stdout.split("Broken contracts")[-1]
    assert contract in " ".join(broken.split()), result.stdout
