from django.contrib import admin

from kbsite.models import LiveEvent


@admin.register(LiveEvent)
class LiveEventAdmin(admin.ModelAdmin):
    list_display = ["id", "group", "created_at"]
    search_fields = ["group"]
