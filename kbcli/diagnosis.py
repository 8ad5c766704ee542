"""A failed trial's diagnosis as lines of text: `kb status` shows it for a submission, `kb
check` for a local run. Apart from kbcli/check.py, which needs the evaluator, so that `kb
status` runs where only the client is installed."""

from typing import Any


def _position(item: dict[str, Any]) -> str:
    return "(" + ", ".join(str(i) for i in item.get("position") or []) + ")"


def diagnosis_lines(diagnosis: dict[str, Any]) -> list[str]:
    """What the failed trial tells the author: the shape of the error first (where the wrong
    values are, how they relate to the expected), the hint, the worst elements, the NaN/inf."""
    out = []
    pattern = diagnosis.get("pattern")
    if isinstance(pattern, dict) and pattern.get("sentence"):
        out.append(str(pattern["sentence"]))
    if diagnosis.get("hint"):
        out.append(str(diagnosis["hint"]))
    worst = [w for w in diagnosis.get("worst") or [] if isinstance(w, dict)]
    if worst:
        out.append(f"{diagnosis.get('outside_tolerance')} of {diagnosis.get('elements')} "
                   "elements outside the tolerance; the worst:")
        out += [f"  at {_position(w)}: expected {w.get('expected')}, got {w.get('got')}"
                for w in worst]
    bad = diagnosis.get("nonfinite")
    if isinstance(bad, dict) and not diagnosis.get("hint"):
        out.append(f"NaN {bad.get('nan')}, +inf {bad.get('posinf')}, -inf {bad.get('neginf')}")
    return out
