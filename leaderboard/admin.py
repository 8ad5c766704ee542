from django.contrib import admin

from leaderboard.models import BestEntry, Record


@admin.register(BestEntry)
class BestEntryAdmin(admin.ModelAdmin):
    """Read-only: entries follow the evaluations (manage.py leaderboard_rebuild recomputes)."""

    list_display = (
        "problem", "hardware", "precision", "participant", "rank", "candidate_median_ms", "flags"
    )
    list_filter = ("hardware", "precision")
    search_fields = ("participant", "problem__slug")
    list_select_related = ("problem", "hardware")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Record)
class RecordAdmin(admin.ModelAdmin):
    list_display = (
        "problem", "hardware", "precision", "participant", "candidate_median_ms", "achieved_at"
    )
    list_filter = ("hardware", "precision")
    list_select_related = ("problem", "hardware")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
