"""Starter kernels for a problem: a file that already passes the judge and that a person (or
`kb starter`) edits into a faster one. The text comes from the evaluator's backends
(evaluator/backends/starters.py), which a runner's self-test uses as well.
"""

from evaluator import backends
from evaluator.backends.starters import has_model, starter_file
from problems.models import Problem

BACKENDS = backends.NAMES


class StarterError(ValueError):
    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def starter_source(*, problem: Problem, backend: str) -> str:
    """A working kernel file for `problem` in `backend` (one of BACKENDS): the submit page, the
    competition entry form and the API's starter endpoint all render it here.

    StarterError when the backend is unknown or the reference has no `class Model`. Whether the
    asker may see the reference is the caller's to check (`Problem.reference_visible_to`): a
    starter contains it."""
    if backend not in BACKENDS:
        raise StarterError(
            f"Unknown backend {backend!r}: one of {', '.join(BACKENDS)}.", code="unknown_backend"
        )
    reference = problem.current_version.source if problem.current_version_id else ""
    if not has_model(reference):
        raise StarterError(
            f"The reference of {problem.slug} defines no class Model.", code="no_model"
        )
    return starter_file(reference, backend, slug=problem.slug)
