# ATTACK (persisting past its evaluation): writes a .pth file (run by every later interpreter
# start) into every site-packages folder it can name and into the interpreter's prefix, and a
# module into the checkout's root and into the harness package the judge imports. The files
# are inert (a comment) and uniquely named, so that a run against an unsandboxed runner harms
# nothing; the test removes any it finds. Prints what it got (KB-ATTACK line), returns zeros.
import json
import os
import site
import sys
import sysconfig

import torch
import torch.nn as nn

# The shared prelude: conftest.render() puts common.py's text here.
from .common import CONFIG, REPORT, Blocked, attempt

MARKER = "# kb-attack persistence marker: inert\n"


def write_each(folders, name):
    written, errors = [], set()
    for folder in dict.fromkeys(f for f in folders if f):
        path = os.path.join(folder, name)
        try:
            with open(path, "x") as f:
                f.write(MARKER)
            written.append(path)
        except OSError as exc:
            errors.add(f"{type(exc).__name__}: {exc.strerror}")
    if not written:
        raise Blocked(f"{len(folders)} folders, none writable ({sorted(errors)})")
    return f"wrote {written}"


def site_folders():
    folders = list(site.getsitepackages())
    for base in (sys.prefix, sys.base_prefix):
        paths = sysconfig.get_paths(vars={"base": base, "platbase": base})
        folders += [paths["purelib"], paths["platlib"]]
    folders += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return folders


def harness_folder():
    import evaluator

    return os.path.dirname(evaluator.__file__)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        tag = CONFIG["tag"]
        attempt("pth_in_site_packages", lambda: write_each(site_folders(), f"kb_attack_{tag}.pth"))
        attempt("pth_in_prefix",
                lambda: write_each([sys.prefix, sys.base_prefix], f"kb_attack_{tag}.pth"))
        attempt("module_in_checkout", lambda: write_each([CONFIG["repo"]], f"kb_attack_{tag}.py"))
        attempt("module_in_harness",
                lambda: write_each([harness_folder(), os.path.join(CONFIG["repo"], "evaluation",
                                                                    "harness")],
                                   f"kb_attack_{tag}.py"))
        print("KB-ATTACK " + json.dumps(REPORT, sort_keys=True), flush=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
