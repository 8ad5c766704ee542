"""The import contracts in pyproject.toml ([tool.importlinter]): the apps depend downward only,
the evaluation harness imports no Django and no app, the `kb` client no server code.

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
