from django.contrib import admin

from problems.models import Problem, ProblemVersion, Tag


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    search_fields = ["name"]


class ProblemVersionInline(admin.TabularInline):
    model = ProblemVersion
    fields = ["version", "source_hash", "origin", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Problem)
class ProblemAdmin(admin.ModelAdmin):
    list_display = ["slug", "level", "number", "precision", "status"]
    list_filter = ["level", "status", "precision", "tags"]
    search_fields = ["slug", "name", "description"]
    filter_horizontal = ["tags"]
    readonly_fields = ["current_version", "created_at", "updated_at"]
    inlines = [ProblemVersionInline]


@admin.register(ProblemVersion)
class ProblemVersionAdmin(admin.ModelAdmin):
    list_display = ["problem", "version", "source_hash", "created_at"]
    search_fields = ["problem__slug", "source_hash"]
    readonly_fields = ["problem", "version", "source", "source_hash", "origin", "created_at"]
