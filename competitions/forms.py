from django import forms

from competitions.models import Competition
from kbsite.templatetags.kbsite_tags import human_label
from submissions.forms import KernelSourceForm, ProblemChoiceField
from submissions.models import Submission
from submissions.services import PRECISIONS


def competition_backends(competition: Competition) -> list[str]:
    """What an entry may be written in: the backends the competition allows (all when it names
    none) that its hardware runs (all when the hardware lists none), in the site's order."""
    allowed = set(competition.backends or Submission.Backend.values)
    served = set(competition.hardware.backends or Submission.Backend.values)
    return [b for b in Submission.Backend.values if b in allowed and b in served]


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
        backends = competition_backends(competition)
        self.fields["backend"].choices = [(b, human_label(b)) for b in backends]
        precisions = competition_precisions(competition)
        self.fields["precision"].choices = [(p, human_label(p)) for p in precisions]
        if backends and "backend" not in self.initial:
            self.initial["backend"] = backends[0]
