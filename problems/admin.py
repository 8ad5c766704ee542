"""Curation in the admin: find problems, read their reference, validate, publish, retire."""

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import reverse

from evaluation.models import Hardware
from kbsite.templatetags.kbsite_tags import highlight_python
from problems.curation import validation_request
from problems.models import Baseline, Problem, ProblemVersion, PublishRefused, Tag, Validation


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    search_fields = ["name"]


class ProblemVersionInline(admin.TabularInline):
    model = ProblemVersion
    fields = ["version", "source_hash", "origin", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


class HardwareChoiceForm(forms.Form):
    hardware = forms.ModelChoiceField(
        queryset=Hardware.objects.all(), empty_label=None, help_text="whose runners validate"
    )


class OverrideForm(forms.Form):
    override_reason = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80}),
        help_text="Why these findings do not matter. Kept with each problem; leave empty to "
        "publish only the problems without findings.",
    )


def latest_validation(problem: Problem) -> Validation | None:
    """The newest validation of the current version, on any hardware, in any state."""
    if problem.current_version is None:
        return None
    validations = sorted(
        problem.current_version.validations.all(), key=lambda v: v.created_at, reverse=True
    )
    return validations[0] if validations else None


@admin.register(Problem)
class ProblemAdmin(admin.ModelAdmin):
    list_display = ["slug", "level", "number", "status", "validation_state", "tag_list"]
    list_filter = ["level", "status", "tags", "precision"]
    search_fields = ["slug", "name", "description", "tags__name"]
    filter_horizontal = ["tags"]
    readonly_fields = [
        "current_version", "validation_report", "reference_code", "created_at", "updated_at",
    ]
    fieldsets = [
        (None, {"fields": ["slug", "level", "number", "name", "status", "tags", "description"]}),
        ("Checking", {"fields": ["precision", "atol", "rtol"]}),
        ("Validation", {"fields": ["validation_report", "findings_override_reason"]}),
        ("Reference", {"fields": ["current_version", "reference_code"]}),
        ("Visibility", {"fields": ["code_visibility", "code_visible_after"]}),
        (None, {"fields": ["created_at", "updated_at"]}),
    ]
    inlines = [ProblemVersionInline]
    actions = ["validate_problems", "publish_problems", "retire_problems"]

    @property
    def media(self) -> forms.Media:
        # The highlighted reference needs pygments' colours, which the site serves.
        return super().media + forms.Media(css={"all": [reverse("pygments_css")]})

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return (
            super()
            .get_queryset(request)
            .select_related("current_version")
            .prefetch_related("tags", "current_version__validations__hardware")
        )

    @admin.display(description="validation")
    def validation_state(self, problem: Problem) -> str:
        validation = latest_validation(problem)
        if validation is None:
            return "not validated"
        codes = ", ".join(f["code"] for f in validation.findings)
        text = f"{validation.status} on {validation.hardware.slug}"
        return f"{text}: {codes}" if codes else text

    @admin.display(description="tags")
    def tag_list(self, problem: Problem) -> str:
        return ", ".join(tag.name for tag in problem.tags.all())

    @admin.display(description="reference")
    def reference_code(self, problem: Problem) -> str:
        return highlight_python(problem.source)

    @admin.display(description="validations of the current version")
    def validation_report(self, problem: Problem) -> str:
        validations = []
        if problem.current_version is not None:
            validations = sorted(
                problem.current_version.validations.all(),
                key=lambda v: v.created_at,
                reverse=True,
            )[:10]
        return render_to_string(
            "problems/admin_validation_report.html",
            {"problem": problem, "validations": validations},
        )

    # --- actions ---------------------------------------------------------------------------------

    @admin.action(description="Validate on a hardware…")
    def validate_problems(self, request: HttpRequest, queryset: QuerySet):
        form = HardwareChoiceForm(request.POST if "apply" in request.POST else None)
        if not form.is_valid():
            if not Hardware.objects.exists():
                self.message_user(
                    request, "No hardware is registered: start a runner first.", messages.ERROR
                )
                return None
            return self._intermediate(
                request, queryset, "problems/admin_validate.html", form, "validate_problems"
            )
        hardware = form.cleaned_data["hardware"]
        queued = []
        with transaction.atomic():
            for problem in queryset:
                if problem.current_version_id is None:
                    self.message_user(
                        request, f"{problem.slug} has no reference to validate.", messages.ERROR
                    )
                    continue
                validation_request(problem=problem, hardware=hardware, requested_by=request.user)
                queued.append(problem.slug)
        if queued:
            self.message_user(
                request,
                f"Queued {len(queued)} validation(s) on {hardware.slug}: {', '.join(queued)}.",
                messages.SUCCESS,
            )
        return None

    @admin.action(description="Publish")
    def publish_problems(self, request: HttpRequest, queryset: QuerySet):
        problems = list(queryset)
        with_findings = [(p, p.open_findings()) for p in problems]
        with_findings = [(p, f) for p, f in with_findings if f]
        if with_findings and "apply" not in request.POST:
            return self._intermediate(
                request,
                queryset,
                "problems/admin_publish.html",
                OverrideForm(),
                "publish_problems",
                with_findings=with_findings,
            )
        form = OverrideForm(request.POST if "apply" in request.POST else None)
        reason = form.cleaned_data["override_reason"] if form.is_valid() else ""
        published, refused, unvalidated = [], [], []
        for problem in problems:
            try:
                problem.publish(override_reason=reason)
            except PublishRefused as error:
                refused.append(error)
                continue
            published.append(problem.slug)
            if not problem.latest_validations():
                unvalidated.append(problem.slug)
        if published:
            self.message_user(request, f"Published {', '.join(published)}.", messages.SUCCESS)
        if unvalidated:
            self.message_user(
                request,
                f"Published without any validation: {', '.join(unvalidated)}.",
                messages.WARNING,
            )
        for error in refused:
            self.message_user(request, f"Not published: {error}.", messages.ERROR)
        return None

    @admin.action(description="Retire (keeps its history, leaves the active boards)")
    def retire_problems(self, request: HttpRequest, queryset: QuerySet):
        retired = []
        for problem in queryset:
            problem.retire()
            retired.append(problem.slug)
        self.message_user(request, f"Retired {', '.join(retired)}.", messages.SUCCESS)

    def _intermediate(self, request, queryset, template, form, action, **extra):
        context = {
            **self.admin_site.each_context(request),
            "title": self.get_actions(request)[action][2],
            "opts": self.model._meta,
            "problems": queryset,
            "form": form,
            "action": action,
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
            **extra,
        }
        return TemplateResponse(request, template, context)


@admin.register(ProblemVersion)
class ProblemVersionAdmin(admin.ModelAdmin):
    list_display = ["problem", "version", "source_hash", "created_at"]
    search_fields = ["problem__slug", "source_hash"]
    readonly_fields = ["problem", "version", "source_code", "source_hash", "origin", "created_at"]
    exclude = ["source"]

    @admin.display(description="source")
    def source_code(self, version: ProblemVersion) -> str:
        return highlight_python(version.source)


@admin.register(Baseline)
class BaselineAdmin(admin.ModelAdmin):
    list_display = ["problem", "hardware", "mode", "median_ms", "torch_version", "created_at"]
    list_filter = ["hardware", "mode"]
    search_fields = ["problem__slug"]


@admin.register(Validation)
class ValidationAdmin(admin.ModelAdmin):
    list_display = ["problem_version", "hardware", "status", "created_at"]
    list_filter = ["status", "hardware"]
    raw_id_fields = ["problem_version"]
