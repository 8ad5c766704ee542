"""The `kb` client as a distribution of its own (kbcli/pyproject.toml, issue 65): installed from
the repository's folder into a fresh venv, offline, with none of the site (no Django, no torch,
no evaluator), it prints its help and its guide, says what `kb check` lacks, and runs an agent's
commands against the real server with each documented exit status.

A fresh venv's bundled setuptools (65 on Python 3.11, none from 3.12) cannot build a wheel
offline, so this environment's pip builds one from the folder (--no-build-isolation) and the
fresh venv's pip installs it (--no-deps). The client's dependencies (kbcli/pyproject.toml's,
and theirs) come from this environment through a .pth file naming a folder of links to them
alone, so that nothing else of this environment is importable there.
"""

import json
import os
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from submissions.models import Submission
from tests.api_support import token_for
from tests.conftest import KERNELS, REPO

# Slow: it builds and installs a distribution and runs it as processes of its own.
pytestmark = pytest.mark.slow

KERNEL = str(KERNELS / "relu_correct.py")
SAMPLE_RELU = REPO / "problems" / "samples" / "level1" / "901_Small_ReLU.py"


def dependency_closure(names: list[str]) -> set[str]:
    """The distributions `names` need, theirs included (no extras)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = metadata.distribution(todo.pop()).metadata["Name"]
        if name.lower() in seen:
            continue
        seen.add(name.lower())
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def link_distributions(names: set[str], folder: Path) -> None:
    """Links in `folder` to the installed files of these distributions (their top-level
    packages, modules and metadata), and to nothing else."""
    folder.mkdir()
    for name in names:
        distribution = metadata.distribution(name)
        for top in {file.parts[0] for file in distribution.files or []} - {".."}:
            target = Path(distribution.locate_file(top))
            if target.exists() and not (folder / top).exists():
                (folder / top).symlink_to(target)


def run(args: list, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                            timeout=300, **kwargs)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv with the client installed from kbcli/, and its dependencies alone."""
    base = tmp_path_factory.mktemp("kb-dist")
    source = base / "kbcli"  # a copy: a build writes build/ and *.egg-info beside the sources
    shutil.copytree(REPO / "kbcli", source,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", base / "wheel", source], env=env)
    (wheel,) = (base / "wheel").glob("*.whl")
    root = base / "venv"
    run([sys.executable, "-m", "venv", root])
    python = root / "bin" / "python"
    run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel], env=env)

    declared = tomllib.loads((REPO / "kbcli" / "pyproject.toml").read_text())
    names = [Requirement(text).name for text in declared["project"]["dependencies"]]
    link_distributions(dependency_closure(names), base / "deps")
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    (Path(purelib.stdout.strip()) / "kb-deps.pth").write_text(f"{base / 'deps'}\n")
    return root


def kb(venv: Path, *args: str, home: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """The installed `kb`, run outside the repository, with no setting of this environment's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KB_", "PYTHON", "DJANGO", "VIRTUAL_ENV"))}
    env.update({"XDG_CONFIG_HOME": str(home), "PYTHONUNBUFFERED": "1"})
    return subprocess.run([str(venv / "bin" / "kb"), *args], cwd=home.parent, env=env,
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_the_client_alone_has_no_site_and_prints_its_help_and_guide(venv, tmp_path):
    """Slow: builds and installs the distribution, then runs it as its own processes."""
    found = run([venv / "bin" / "python", "-c",
                 "import importlib.util as u, json, kbcli; print(json.dumps({"
                 "'missing': [n for n in ('django', 'rest_framework', 'torch', 'evaluator', "
                 "'kbsite', 'submissions') if u.find_spec(n) is None], "
                 "'kbcli': kbcli.__file__, 'requests': u.find_spec('requests') is not None}))"],
                cwd=tmp_path)
    where = json.loads(found.stdout)
    assert where["missing"] == ["django", "rest_framework", "torch", "evaluator", "kbsite",
                                "submissions"]
    assert where["kbcli"].startswith(str(venv)) and where["requests"]
    extras = run([venv / "bin" / "python", "-c",
                  "from importlib.metadata import requires; print(requires('kbsite-kb'))"])
    assert "torch>=2.6; extra == \"check\"" in extras.stdout

    home = tmp_path / "home"
    helped = kb(venv, "--help", home=home)
    assert helped.returncode == 0 and "guide" in helped.stdout
    assert "exit status:\n  0  done" in helped.stdout
    guide = kb(venv, "guide", home=home)
    assert guide.returncode == 0, guide.stderr
    assert "class ModelNew(torch.nn.Module)" in guide.stdout and "not logged in" in guide.stdout
    as_json = kb(venv, "guide", "--json", home=home)
    assert json.loads(as_json.stdout)["exit_codes"]["2"].startswith("a usage error")

    # kb check needs the evaluator: said, with the way to it, and no traceback.
    checked = kb(venv, "check", KERNEL, "--reference", str(SAMPLE_RELU), "--json", home=home)
    assert checked.returncode == 1 and "Traceback" not in checked.stderr
    assert json.loads(checked.stdout)["error"]["code"] == "no_evaluator"
    assert "pip install './kbcli[check]'" in checked.stderr
    usage = kb(venv, "submit", KERNEL, home=home)  # no --backend
    assert usage.returncode == 2 and "--backend" in usage.stderr
    unknown = kb(venv, "problems", home=home)
    assert unknown.returncode == 1 and "kb login" in unknown.stderr


@pytest.mark.django_db(transaction=True)
def test_the_client_alone_runs_an_agents_commands_with_each_exit_status(
    venv, tmp_path, live_site, start_runner, user, relu_problem, cpu_hardware
):
    """Slow: the installed kb against the real server, then a real runner for a verdict."""
    home = tmp_path / "home"
    login = kb(venv, "login", "--url", live_site, "--token", token_for(user), "--json",
               home=home)
    assert login.returncode == 0, login.stderr
    assert json.loads(login.stdout)["url"] == live_site
    listed = kb(venv, "problems", "--json", home=home)
    assert relu_problem.slug in {p["slug"] for p in json.loads(listed.stdout)}

    # No runner yet: the wait runs out (3), and the submission is as it was left.
    waited = kb(venv, "submit", KERNEL, "--problem", relu_problem.slug, "--backend", "torch",
                "--wait", "--timeout", "2", "--json", home=home)
    assert waited.returncode == 3, waited.stderr
    submission = json.loads(waited.stdout)
    assert submission["status"] == "queued" and submission["settled"] is False
    ident = str(submission["id"])
    shown = kb(venv, "status", ident, "--json", home=home)
    assert shown.returncode == 0 and json.loads(shown.stdout)["id"] == submission["id"]
    cancelled = kb(venv, "cancel", ident, "--json", home=home)
    assert cancelled.returncode == 0 and json.loads(cancelled.stdout)["status"] == "cancelled"
    # Settled, with no result: the wait ends at once, and not in success (1).
    settled = kb(venv, "status", ident, "--wait", "--json", home=home)
    assert settled.returncode == 1 and json.loads(settled.stdout)["status"] == "cancelled"
    again = kb(venv, "cancel", ident, "--json", home=home)  # the site's refusal (1)
    assert again.returncode == 1 and json.loads(again.stdout)["error"]["http_status"] == 409

    # A runner, and a test run followed to its verdict: correct, so 0.
    start_runner()
    tested = kb(venv, "test", KERNEL, "--problem", relu_problem.slug, "--backend", "torch",
                "--json", home=home)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    result = json.loads(tested.stdout)
    assert result["verdict"] == "correct" and result["test_run"] and result["settled"]
    assert Submission.objects.get(pk=result["id"]).test_run
