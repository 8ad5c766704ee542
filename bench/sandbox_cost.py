"""What the candidate's sandbox (bubblewrap, evaluator/runner/jail.py) costs, side by side.

    python3 bench/sandbox_cost.py --cpu                                  # the sample problems
    python3 bench/sandbox_cost.py --kernelbench .kernelbench --only 19_ReLU   # on a GPU host

Two measurements in one run:

1. Start-up: the worker's interpreter with torch imported (and, on a GPU, a CUDA context made),
   started plainly and inside the sandbox as the judge starts it, alternately, `--starts` times
   each: the sandbox's own cost per evaluation when nothing is started ahead.
2. Whole evaluations through the real runner (bench/eval_speed.py, fast path): the same kernels
   with the sandbox off (`--no-sandbox`) and on, one run after the other, compared by the
   median end-to-end time, harness time and start phase of each kernel.

It prints both tables and the differences (sandboxed minus plain) last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def startup(device: str, starts: int) -> dict[str, list[float]]:
    from evaluator import launcher
    from evaluator.runner import jail

    code = "import torch"
    if device != "cpu":
        code += "; torch.empty(1, device='cuda').sum().item()"
    times: dict[str, list[float]] = {"plain": [], "sandboxed": []}
    base_env = {k: v for k, v in os.environ.items()
                if k in ("PATH", "LANG", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH")}
    for _ in range(starts):
        for kind in ("plain", "sandboxed"):
            argv = [sys.executable, "-c", code]
            env = dict(base_env)
            slot = Path(tempfile.mkdtemp(prefix="kbcost-"))
            if kind == "sandboxed":
                decision = jail.for_job(device, slot, 1024)
            else:
                decision = {"mode": "off"}
            started = time.perf_counter()
            ran = launcher.run_sandboxed(decision, argv, env=env, timeout=600,
                                         out_limit=2000, err_limit=2000)
            times[kind].append(time.perf_counter() - started)
            if ran["rc"] != 0:
                raise SystemExit(f"{kind} start failed: {ran['err']}")
    return times


def evaluations(args: argparse.Namespace, no_sandbox: bool, out: Path) -> dict:
    cmd = [sys.executable, str(REPO / "bench" / "eval_speed.py"), "--json", str(out),
           "--repeats", str(args.repeats)]
    cmd += ["--cpu"] if args.cpu else ["--kernelbench", args.kernelbench]
    if args.only:
        cmd += ["--only", args.only]
    if no_sandbox:
        cmd.append("--no-sandbox")
    print("$", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=False)
    return json.loads(out.read_text()) if out.exists() else {"rows": []}


def medians(rows: list[dict]) -> dict[str, dict[str, float]]:
    by_label: dict[str, list[dict]] = {}
    for row in rows:
        label = row["label"].split(" #")[0].replace(" first", "")
        by_label.setdefault(label, []).append(row)
    out = {}
    for label, group in by_label.items():
        out[label] = {key: statistics.median([r[key] for r in group if r.get(key) is not None])
                      for key in ("e2e", "harness", "start")
                      if any(r.get(key) is not None for r in group)}
        out[label]["n"] = len(group)
        out[label]["correct"] = sum(r["verdict"] == "correct" for r in group)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--kernelbench", default=str(REPO / ".kernelbench"))
    parser.add_argument("--only", default="")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--json", default="")
    args = parser.parse_args()

    device = "cpu" if args.cpu else "cuda"
    times = startup(device, args.starts)
    plain, boxed = statistics.median(times["plain"]), statistics.median(times["sandboxed"])
    folder = Path(tempfile.mkdtemp(prefix="kbcost-"))
    off = medians(evaluations(args, True, folder / "off.json")["rows"])
    on = medians(evaluations(args, False, folder / "on.json")["rows"])

    what = "torch and CUDA" if device != "cpu" else "torch"
    print(f"\nsandbox start-up, worker interpreter with {what}"
          f" ({args.starts} each, alternating): plain {plain:.3f} s, sandboxed {boxed:.3f} s, "
          f"cost {boxed - plain:+.3f} s (ratio {boxed / plain:.2f})")
    print("\nwhole evaluations, medians in seconds (plain -> sandboxed, difference)")
    print(f"{'kernel':16} {'n':>5} {'e2e':>22} {'harness':>22} {'start':>22}")
    for label in on:
        if label not in off:
            continue
        cells = []
        for key in ("e2e", "harness", "start"):
            a, b = off[label].get(key), on[label].get(key)
            cells.append("-" if a is None or b is None else f"{a:6.2f} -> {b:6.2f} {b - a:+6.2f}")
        n = f"{off[label]['correct']}/{on[label]['correct']}"
        print(f"{label:16} {n:>5} {cells[0]:>22} {cells[1]:>22} {cells[2]:>22}")
    if args.json:
        Path(args.json).write_text(json.dumps({"startup": times, "off": off, "on": on}, indent=1))
    ok = all(v["correct"] == v["n"] for v in [*on.values(), *off.values()]) and bool(on)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
