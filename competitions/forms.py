from django import forms

from competitions.models import Competition
from submissions.forms import KernelSourceForm
from submissions.models import Submission
from submissions.services import PRECISIONS


class EntryForm(KernelSourceForm):
    """A kernel for one of the competition's problems, in what the competition allows."""

    field_order = ["problem", "backend", "precision", "source_file", "source"]

    problem = forms.ModelChoiceField(queryset=None)
    backend = forms.ChoiceField()
    precision = forms.ChoiceField()

    def __init__(self, *args, competition: Competition, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["problem"].queryset = competition.problems.order_by("level", "number")
        backends = competition.backends or [value for value, _ in Submission.Backend.choices]
        labels = dict(Submission.Backend.choices)
        self.fields["backend"].choices = [(b, labels.get(b, b)) for b in backends]
        self.fields["precision"].choices = [(p, p) for p in competition.precisions or PRECISIONS]
