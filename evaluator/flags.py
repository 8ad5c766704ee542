"""Every flag's kind, once: an exploit or a note.

A result's flags (Evaluation.flags, the harness's Result["flags"]) hold both kinds in one list;
this module alone says which is which, and everything else asks it: the harness (notes never
reject), the scoring rule (evaluation/scoring.py: notes do not keep a result off the boards),
the boards and their exports (only exploits are listed as exploits), the API (`flags` and
`notes` apart) and the pages.

- An exploit (evaluator/judge/exploits.py FLAGS, and any name not listed here) is a way to
  fool the evaluator: it rejects the result or keeps it off the boards, and is shown as such.
- A note is a fact about an honest result. It is shown beside the result and never listed as an
  exploit. Two kinds of note change the standing:
  HOLDING notes keep the result from ranking while they stand (a timing the judge's own clock
  did not confirm: there is no figure it vouches for); CAPPED notes rank the result no better
  than the PyTorch reference timed beside it (scoring.ranking_ms and scoring.speedup apply the
  cap). A timing that a re-verification did not reproduce holds nothing: the result ranks at
  the slowest of its evaluations (evaluation/stats.settle), with the note saying so.

Light on purpose (no torch): the web processes import it through scoring.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# Own kernels' share of the profiled call's device (or host) time below which the claimed
# backend does (almost) none of the work (exploits.backend_share).
BACKEND_SHARE_MIN = 0.001

BACKEND_SHARE_SMALL = "backend_share_small"
TIMING_NOT_REPRODUCED = "timing_not_reproduced"
TIMING_UNCONFIRMED = "timing_unconfirmed"

# name -> what it means. Shown with the result, never among the exploits.
NOTES: dict[str, str] = {
    BACKEND_SHARE_SMALL: (
        f"the kernel's own kernels ran but do under {BACKEND_SHARE_MIN:.1%} of the time (the "
        "library does the rest, or they only copy what PyTorch computed): it ranks, but no "
        "better than the PyTorch reference timed beside it"
    ),
    TIMING_NOT_REPRODUCED: (
        "re-verification with fresh seeds did not reproduce the first evaluation's timing: no "
        "two of its evaluations' timings agree, so it ranks at the slowest of them (noise, not "
        "an exploit)"
    ),
    TIMING_UNCONFIRMED: (
        "the judge's own clock around each timed call did not confirm the times the kernel's "
        "process reported, in any of its timing attempts: kept off the boards until it is "
        "evaluated again (a loaded host, or a report the judge cannot vouch for)"
    ),
}
HOLDING_NOTES = frozenset({TIMING_UNCONFIRMED})
CAPPED_NOTES = frozenset({BACKEND_SHARE_SMALL})

# KernelBench's own counting (the model-run tables' second column): its evaluator checks the
# outputs only, so a kernel whose claimed backend did not do the work still counts as correct.
KERNELBENCH_IGNORES = frozenset(NOTES) | {"backend_not_used"}


def is_note(name: str) -> bool:
    return name in NOTES


def exploits(flags: Iterable[Any] | None) -> list[str]:
    """The flags that are exploits (anything not a known note), in their order."""
    return [str(f) for f in flags or [] if not is_note(str(f))]


def notes(flags: Iterable[Any] | None) -> list[str]:
    """The flags that are notes, in their order."""
    return [str(f) for f in flags or [] if is_note(str(f))]


def backend_share_text(report: Mapping[str, Any] | None) -> str | None:
    """"Your Triton kernels do 0.05% of the device time", from a judge's backend report
    (checks["backend"]); None when no share was measured."""
    if not isinstance(report, Mapping) or report.get("share") is None:
        return None
    from evaluator.backends import LABELS

    backend = LABELS.get(str(report.get("backend") or ""), "own")
    share = float(report["share"])
    figure = f"{share:.2%}" if share >= 0.0001 or share == 0 else f"{share:.1e}"
    return f"Your {backend} kernels do {figure} of the {report.get('basis') or 'time'}"


def described_notes(flags: Iterable[Any] | None,
                    checks: Mapping[str, Any] | None = None) -> list[dict[str, str]]:
    """Each note as {"name", "text"}: its meaning, with the measured share where it has one."""
    checks = checks if isinstance(checks, Mapping) else {}
    out = []
    for name in notes(flags):
        text = NOTES[name]
        if name == BACKEND_SHARE_SMALL:
            share = backend_share_text(checks.get("backend"))
            if share:
                text = f"{share}: {text.split(': ', 1)[-1]}"
        out.append({"name": name, "text": text})
    return out


def describe_device_seen(seen: dict[str, Any] | None) -> str | None:
    """One line on what the GPU driver saw during the timing window that counted
    (judge/provenance.py records it), for the owner; None where nothing was sampled."""
    if not isinstance(seen, dict) or not seen.get("sampled"):
        return None
    parts = []
    for name, unit, label in (("sm_clock_mhz", "MHz", "SM clock"),
                              ("memory_clock_mhz", "MHz", "memory clock"),
                              ("power_w", "W", "power"), ("temperature_c", "°C", "temperature")):
        ends = [(seen.get(end) or {}).get(name) for end in ("start", "end")]
        ends = [v for v in ends if isinstance(v, int | float)]
        if ends:
            span = f"{ends[0]:g}" if len(set(ends)) == 1 else f"{ends[0]:g} to {ends[-1]:g}"
            parts.append(f"{label} {span} {unit}")
    others = seen.get("others") if isinstance(seen.get("others"), int) else 0
    counted = f"{others} other process{'es' if others != 1 else ''}"
    if not seen.get("comparable"):
        company = f"{counted} seen, not told apart from the judge's own"
    elif others:
        company = f"{counted} used it"
    else:
        company = "no other process used it"
    return "; ".join([*parts, company])
