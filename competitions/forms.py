from django import forms

from competitions.models import Competition
from evaluator import backends
from kbsite.templatetags.kbsite_tags import human_label
from submissions.forms import KernelSourceForm, ProblemChoiceField
from submissions.services import PRECISIONS


def competition_backends(competition: Competition) -> list[str]:
    """What an entry may be written in: the backends the competition allows (all when it names
    none) that its hardware runs (all when the hardware lists none), in the table's order."""
    allowed = set(competition.backends or backends.NAMES)
    served = set(competition.hardware.backends or backends.NAMES)
    return [b for b in backends.NAMES if b in allowed and b in served]


def competition_precisions(competition: Competition) -> list[str]:
    return [p for p in PRECISIONS if not competition.precisions or p in competition.precisions]


class EntryForm(KernelSourceForm):
    """A kernel for one of the competition's problems, in what the competition allows and its
    hardware runs (the service refuses anything else anyway; the form does not offer it)."""

    field_order = ["problem", "backend", "precision", "source_file", "source"]

    problem = ProblemChoiceField(queryset=None)
    backend = forms.ChoiceField()
    precision = forms.ChoiceField()

    def __init__(self, *args, competition: Competition, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["problem"].queryset = competition.problems.order_by("level", "number")
        offered = competition_backends(competition)
        self.fields["backend"].choices = [(b, backends.LABELS[b]) for b in offered]
        precisions = competition_precisions(competition)
        self.fields["precision"].choices = [(p, human_label(p)) for p in precisions]
        if offered and "backend" not in self.initial:
            self.initial["backend"] = offered[0]
