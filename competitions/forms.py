from django import forms

from competitions.models import Competition
from submissions.models import Submission
from submissions.services import PRECISIONS


class EntryForm(forms.Form):
    """A kernel for one of the competition's problems, in what the competition allows."""

    problem = forms.ModelChoiceField(queryset=None)
    backend = forms.ChoiceField()
    precision = forms.ChoiceField()
    source_file = forms.FileField(required=False, label="Upload a .py file")
    source = forms.CharField(
        required=False,
        strip=False,
        label="or paste the code",
        widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false", "class": "code"}),
    )

    def __init__(self, *args, competition: Competition, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["problem"].queryset = competition.problems.order_by("level", "number")
        backends = competition.backends or [value for value, _ in Submission.Backend.choices]
        labels = dict(Submission.Backend.choices)
        self.fields["backend"].choices = [(b, labels.get(b, b)) for b in backends]
        self.fields["precision"].choices = [(p, p) for p in competition.precisions or PRECISIONS]

    def clean(self):
        cleaned = super().clean()
        if not cleaned.get("source_file") and not (cleaned.get("source") or "").strip():
            raise forms.ValidationError("Upload a file or paste the code.")
        return cleaned
