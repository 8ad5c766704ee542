"""Starter kernels as text: for a reference and a backend, a file that already passes the judge
and that a person (or `kb starter`, or a runner's self-test) edits into a faster one. Nothing
here runs it.

Every starter keeps the reference's own `Model` (renamed `Reference`) so that `ModelNew`
inherits its constructor, and with it the same parameters drawn in the same order, which the
judge compares against. PyTorch's starter is the reference's ops as they are; the other backends
run the reference's ops and then pass each output tensor through an elementwise kernel of the
backend (its executor's `starter_kernel`, a copy the user turns into real work), so a starter is
correct and shows the structure of a kernel in that backend from its first submission: launch,
indexing, the tail, dtypes.
"""

from __future__ import annotations

import re

from evaluator import backends

_MODEL_CLASS = re.compile(r"^class\s+Model\s*([(:])", re.MULTILINE)
_MODEL_SUPER = re.compile(r"\bsuper\(\s*Model\s*,")



def has_model(reference: str) -> bool:
    return bool(_MODEL_CLASS.search(reference))


def _renamed(reference: str, name: str) -> str:
    body = _MODEL_CLASS.sub(rf"class {name}\1", reference)
    return _MODEL_SUPER.sub(f"super({name},", body)


def _extension_name(slug: str, backend: str) -> str:
    # A valid Python identifier, one per problem and backend: the build cache keys on it too.
    return re.sub(r"\W", "_", f"kb_starter_{backend}_{slug}").lower()


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



def starter_file(reference: str, backend: str, *, slug: str) -> str:
    """The starter of `backend` for a reference that defines `class Model` (has_model)."""
    executor = backends.get(backend)
    if executor.starter_kernel is None:  # plain PyTorch: the reference's ops are the start
        return TORCH_HEADER.format(slug=slug) + _renamed(reference, "ModelNew")
    header = PASS_THROUGH_HEADER.format(label=executor.label, slug=slug)
    kernel = executor.starter_kernel.format(name=_extension_name(slug, backend))
    return (
        header
        + "\n"
        + kernel
        + "\n\n# The reference, as the problem defines it.\n"
        + _renamed(reference, "Reference").rstrip("\n")
        + "\n"
        + MODEL_NEW
    )
