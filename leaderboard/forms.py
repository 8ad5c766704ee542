from django import forms

from evaluation.models import Hardware
from leaderboard.selectors import BASELINES
from problems.models import Problem


class TableFilterForm(forms.Form):
    """The filters of the models and runs tables (GET parameters): selects of what exists."""

    hardware = forms.ModelChoiceField(
        queryset=Hardware.objects.all(),
        to_field_name="slug",
        required=False,
        empty_label="all hardware",
    )
    level = forms.TypedChoiceField(coerce=int, empty_value=None, required=False)
    baseline = forms.ChoiceField(
        choices=[(b, b) for b in BASELINES], required=False, initial="eager"
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # The levels a visitor can find problems in (published, and retired for the record).
        levels = (
            Problem.objects.filter(status__in=Problem.LISTED)
            .values_list("level", flat=True)
            .distinct()
            .order_by("level")
        )
        self.fields["level"].choices = [("", "all levels")] + [(lv, f"level {lv}") for lv in levels]

    def clean_baseline(self) -> str:
        return self.cleaned_data.get("baseline") or "eager"
