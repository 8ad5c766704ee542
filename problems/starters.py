"""Starter kernels: for a problem and a backend, a file that already passes the judge and that a
person (or `kb starter`) edits into a faster one. Text only: nothing here runs it.

Every starter keeps the reference's own `Model` (renamed `Reference`) so that `ModelNew`
inherits its constructor, and with it the same parameters drawn in the same order, which the
judge compares against. PyTorch's starter is the reference's ops as they are; the other backends
run the reference's ops and then pass each output tensor through an elementwise kernel of the
backend (a copy the user turns into real work), so a starter is correct and shows the structure
of a kernel in that backend from its first submission: launch, indexing, the tail, dtypes.

Each backend's own kernel comes from its executor (evaluator/backends/), which says what the
backend means everywhere.
"""

import re

from evaluator import backends
from problems.models import Problem

BACKENDS = backends.NAMES

_MODEL_CLASS = re.compile(r"^class\s+Model\s*([(:])", re.MULTILINE)
_MODEL_SUPER = re.compile(r"\bsuper\(\s*Model\s*,")


class StarterError(ValueError):
    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _renamed(reference: str, name: str) -> str:
    body = _MODEL_CLASS.sub(rf"class {name}\1", reference)
    return _MODEL_SUPER.sub(f"super({name},", body)


def _extension_name(problem: Problem, backend: str) -> str:
    # A valid Python identifier, one per problem and backend: the build cache keys on it too.
    return re.sub(r"\W", "_", f"kb_starter_{backend}_{problem.slug}").lower()


TORCH_HEADER = """\
# A PyTorch starter for {slug}: the reference's own ops, as ModelNew. Keep the constructor's
# and forward's signatures (and the parameters the constructor makes); make forward faster.
"""

PASS_THROUGH_HEADER = """\
# A {label} starter for {slug}. ModelNew runs the reference's ops (the class Reference
# below, the problem's Model renamed) and passes each output through `pass_through`, an
# elementwise {label} kernel that copies its input. Replace that copy with the computation,
# then drop the call to the reference in forward. Keep the constructor's and forward's
# signatures: the judge builds ModelNew with the reference's init inputs and compares their
# parameters' results.
"""

MODEL_NEW = '''

def _pass_through_all(value):
    """Each tensor of the output (a tensor, or a tuple or list of them) through the kernel."""
    if isinstance(value, torch.Tensor):
        return pass_through(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_pass_through_all(v) for v in value)
    return value


class ModelNew(Reference):
    def forward(self, *args, **kwargs):
        return _pass_through_all(super().forward(*args, **kwargs))
'''


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
    if not _MODEL_CLASS.search(reference):
        raise StarterError(
            f"The reference of {problem.slug} defines no class Model.", code="no_model"
        )
    executor = backends.get(backend)
    if executor.starter_kernel is None:  # plain PyTorch: the reference's ops are the start
        return TORCH_HEADER.format(slug=problem.slug) + _renamed(reference, "ModelNew")
    header = PASS_THROUGH_HEADER.format(label=executor.label, slug=problem.slug)
    kernel = executor.starter_kernel.format(name=_extension_name(problem, backend))
    return (
        header
        + "\n"
        + kernel
        + "\n\n# The reference, as the problem defines it.\n"
        + _renamed(reference, "Reference").rstrip("\n")
        + "\n"
        + MODEL_NEW
    )
