"""The evaluator: correctness and timing of a candidate kernel against a reference problem.

Plain Python plus torch (and triton); it imports no Django. The runner calls
`evaluator.runner.sandbox.run_job`, which starts a sandboxed process tree:

    runner (run_job)  ->  judge (trusted: reference, inputs, expected outputs, verdict)
                              ->  worker (runs the candidate's ModelNew, nothing else)

This module stays light (no torch import) so the runner can import the package cheaply.
"""

from __future__ import annotations

from evaluator.verdicts import HARNESS_VERDICTS

# Bumped whenever a change can alter a verdict or a timing; stored with every evaluation.
EVALUATOR_VERSION = "kbsite-harness 0.5.0"

# What the harness may return (evaluator/verdicts.py lists every verdict).
VERDICTS = HARNESS_VERDICTS
