from django import forms
from django.contrib import admin, messages
from django.db.models import Q

from competitions.models import Competition, Entry
from competitions.services import competition_close, competition_freeze
from problems.models import Problem
from submissions.forms import backend_choices
from submissions.services import PRECISIONS


class CompetitionAdminForm(forms.ModelForm):
    """Backends and precisions as boxes to tick (stored as JSON lists; none ticked allows all)."""

    backends = forms.MultipleChoiceField(
        choices=backend_choices,
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="None ticked allows every backend the hardware runs.",
    )
    precisions = forms.MultipleChoiceField(
        choices=[(p, p) for p in PRECISIONS],
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="None ticked allows every precision.",
    )

    class Meta:
        model = Competition
        fields = [
            "slug", "title", "description", "problems", "hardware", "backends", "precisions",
            "starts_at", "ends_at", "daily_limit", "queue_weight", "code_hidden", "published",
            "created_at",
        ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Most competitions leave the queue alone: a form without the weight keeps the
        # competition's (1 for a new one), and an empty box means 1.
        self.fields["queue_weight"].required = False

    def clean_queue_weight(self) -> int:
        return self.cleaned_data["queue_weight"] or 1


@admin.register(Competition)
class CompetitionAdmin(admin.ModelAdmin):
    """Create competitions, open and close them now, and freeze their standings."""

    form = CompetitionAdminForm
    list_display = (
        "title", "slug", "hardware", "starts_at", "ends_at", "queue_weight", "published",
        "frozen_at",
    )
    list_filter = ("published", "hardware")
    prepopulated_fields = {"slug": ("title",)}
    filter_horizontal = ("problems",)
    readonly_fields = ("frozen_at", "final_standings")
    actions = ("open_now", "close_now", "freeze")

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.name == "problems":
            # Published problems only (drafts and held ones are not ready for entrants); a
            # problem already in this competition stays listed, so saving does not drop it.
            chosen = Q()
            competition_id = request.resolver_match.kwargs.get("object_id")
            if competition_id and str(competition_id).isdigit():
                chosen = Q(competitions__pk=int(competition_id))
            kwargs["queryset"] = (
                Problem.objects.filter(Q(status=Problem.Status.PUBLISHED) | chosen)
                .distinct()
                .order_by("level", "number")
            )
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    @admin.action(description="Open now (publish, start now)")
    def open_now(self, request, queryset) -> None:
        for competition in queryset:
            try:
                competition.open_now()
            except ValueError as error:
                self.message_user(request, f"{competition}: {error}", messages.ERROR)
            else:
                self.message_user(request, f"{competition} is open.")

    @admin.action(description="Close now (end now; later entries are after the deadline)")
    def close_now(self, request, queryset) -> None:
        for competition in queryset:
            competition_close(competition=competition)
            self.message_user(request, f"{competition} is closed.")

    @admin.action(description="Freeze the standings (after the end)")
    def freeze(self, request, queryset) -> None:
        for competition in queryset:
            if competition_freeze(competition=competition):
                self.message_user(request, f"The standings of {competition} are frozen.")
            else:
                self.message_user(
                    request,
                    f"{competition}: only an ended competition can be frozen, and only once.",
                    messages.WARNING,
                )


@admin.register(Entry)
class EntryAdmin(admin.ModelAdmin):
    list_display = (
        "competition",
        "user",
        "problem",
        "submission",
        "submitted_at",
        "after_deadline",
    )
    list_filter = ("competition", "after_deadline")
    list_select_related = ("competition", "user", "problem")
    raw_id_fields = ("submission",)
