from django import forms

from evaluation.models import Hardware
from problems.models import Problem
from submissions.models import Submission
from submissions.services import PRECISIONS


class SubmissionForm(forms.Form):
    problem = forms.ModelChoiceField(
        queryset=Problem.objects.exclude(status=Problem.Status.RETIRED).order_by("level", "number")
    )
    backend = forms.ChoiceField(choices=Submission.Backend.choices, initial="torch")
    hardware = forms.ModelChoiceField(queryset=Hardware.objects.all(), to_field_name="slug")
    precision = forms.ChoiceField(choices=[(p, p) for p in PRECISIONS], initial="fp32")
    source_file = forms.FileField(required=False, label="Upload a .py file")
    source = forms.CharField(
        required=False,
        label="or paste the code",
        widget=forms.Textarea(attrs={"rows": 18, "spellcheck": "false", "class": "code"}),
    )

    def clean(self):
        cleaned = super().clean()
        if not cleaned.get("source_file") and not (cleaned.get("source") or "").strip():
            raise forms.ValidationError("Upload a file or paste the code.")
        return cleaned
