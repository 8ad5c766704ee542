from django import forms

from evaluation.models import Hardware
from leaderboard.selectors import BASELINES


class TableFilterForm(forms.Form):
    """The filters of the models and runs tables (GET parameters)."""

    hardware = forms.ModelChoiceField(
        queryset=Hardware.objects.all(), to_field_name="slug", required=False,
        empty_label="all hardware",
    )
    level = forms.IntegerField(min_value=1, max_value=99, required=False)
    baseline = forms.ChoiceField(
        choices=[(b, b) for b in BASELINES], required=False, initial="eager"
    )

    def clean_baseline(self) -> str:
        return self.cleaned_data.get("baseline") or "eager"
