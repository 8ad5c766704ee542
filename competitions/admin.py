from django.contrib import admin, messages

from competitions.models import Competition, Entry
from competitions.services import competition_close, competition_freeze


@admin.register(Competition)
class CompetitionAdmin(admin.ModelAdmin):
    """Create competitions, open and close them now, and freeze their standings."""

    list_display = ("title", "slug", "hardware", "starts_at", "ends_at", "published", "frozen_at")
    list_filter = ("published", "hardware")
    prepopulated_fields = {"slug": ("title",)}
    filter_horizontal = ("problems",)
    readonly_fields = ("frozen_at", "final_standings")
    actions = ("open_now", "close_now", "freeze")

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
