"""Web pages: submit, a submission's live page, a user's list, its re-verification and Nsight
Compute requests; the API's docs page."""

from contextlib import suppress

from django.apps import apps
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.settings import spectacular_settings
from drf_spectacular.views import SpectacularSwaggerSplitView

from evaluation.models import Hardware
from evaluation.profiles import profile_view
from kbsite.templatetags.kbsite_tags import human_label
from problems.models import Problem
from problems.selectors import problem_by_name
from problems.starters import StarterError, starter_source
from submissions.cancellations import CancelError, may_cancel, submission_cancel
from submissions.errors import SubmissionError
from submissions.forms import SubmissionFilterForm, SubmissionForm
from submissions.models import Evaluation, NcuReport, Reverification, Submission
from submissions.ncu_reports import NcuRequestError, ncu_report_request
from submissions.quotas import (
    QuotaExceeded,
    ncu_reports_per_day,
    quota_usage,
    reverifications_per_day,
)
from submissions.reverifications import (
    ReverificationError,
    held_on_timing,
    reverification_request_by_owner,
)
from submissions.selectors import (
    RANKING_LABELS,
    can_act_on,
    can_see_reference,
    can_see_source,
    can_see_submission,
    evaluation_logs,
    first_compile_error,
    ranked_figure,
    shown_profile,
    shown_trials,
    submission_evaluations,
    submission_ranking,
    submission_status_payload,
    submission_took,
    user_submissions,
)
from submissions.services import submission_create
from submissions.sources import clean_filename

# The same answers as the API gives for the same mistakes.
ERROR_STATUS = {
    "too_large": 413,
    "retired": 409,
    "forbidden": 403,
    "quota_queued": 429,
    "quota_gpu_seconds": 429,
}


def _human_choices(field) -> None:
    """Show a choice field's stored values as people read them ("cuda" -> "CUDA")."""
    field.choices = [
        (value, human_label(value) if value else text) for value, text in field.choices
    ]


def _initial_problem(value: str, *, user) -> Problem | None:
    """?problem=: a slug or a level and number (problems.selectors), or a bare pk, which links
    made before slugs carry."""
    problems = Problem.objects.open_for_submissions(user)
    if value.isdigit():
        return problems.filter(pk=int(value)).first()
    return problem_by_name(problems, name=value)


def _start_from_starter(request, form: SubmissionForm) -> None:
    """?problem=...&backend=B: the form starts from that problem's working starter kernel in a
    backend it offers (PyTorch unless asked), where the user may see the reference it holds."""
    chosen = form.initial.get("problem")
    offered = [value for value, _ in form.fields["backend"].choices]
    backend = request.GET.get("backend") or form.fields["backend"].initial
    if not request.GET.get("backend") and backend not in offered and offered:
        backend = offered[0]
    if chosen is None or backend not in offered:
        return
    form.initial["backend"] = backend
    if chosen.reference_visible_to(request.user):
        with suppress(StarterError):  # a reference without a Model class: nothing to start from
            form.initial["source"] = starter_source(problem=chosen, backend=backend)


@login_required
def submission_new(request):
    initial = {}
    if request.GET.get("problem"):
        initial["problem"] = _initial_problem(request.GET["problem"], user=request.user)
    all_hardware = list(Hardware.objects.all())
    if len(all_hardware) == 1:
        initial["hardware"] = all_hardware[0].slug  # nothing to choose: chosen already
    form = SubmissionForm(
        request.POST or None, request.FILES or None, initial=initial, user=request.user
    )
    # Offer only the backends some hardware runs (a CPU-only site offers no CUDA); the service
    # refuses the others anyway. Hardware that does not list its backends may run any.
    if all_hardware and all(hw.backends for hw in all_hardware):
        runnable = {backend for hw in all_hardware for backend in hw.backends}
        field = form.fields["backend"]
        field.choices = [(v, t) for v, t in field.choices if v in runnable] or field.choices
        form.fields["hardware"].help_text = " · ".join(
            f"{hw.slug} runs {', '.join(human_label(b) for b in hw.backends)}"
            for hw in all_hardware
        )
    _human_choices(form.fields["backend"])
    _start_from_starter(request, form)
    problem = initial.get("problem")
    public_code = bool(problem and problem.code_is_public())
    status = 200
    retry_after = None
    if request.method == "POST":
        status = 400
        if form.is_valid():
            data = form.cleaned_data
            try:
                source, filename = form.kernel_source()
                test_run, timed = form.test_run_and_timed()
                submission = submission_create(
                    user=request.user,
                    problem=data["problem"],
                    source=source,
                    backend=data["backend"],
                    hardware=data["hardware"],
                    precision=data["precision"],
                    filename=filename,
                    test_run=test_run,
                    timed=timed,
                )
            except SubmissionError as error:
                form.add_error(None, error.message)
                status = ERROR_STATUS.get(error.code, 400)
                retry_after = error.retry_after
            else:
                return redirect(submission)
    response = render(
        request,
        "submissions/new.html",
        {"form": form, "quota": quota_usage(user=request.user), "public_code": public_code},
        status=status,
    )
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


def _evaluation_context(request, submission: Submission) -> dict:
    evaluation = submission.latest_evaluation
    # Everything derived from the source follows the source (selectors.can_see_source); asking
    # for more (another re-verification, an Nsight Compute report) and the seeds are the
    # owner's and staff's (can_act_on).
    details = can_see_source(submission, request.user)
    reference = can_see_reference(submission, request.user)
    owner = can_act_on(submission, request.user)
    logs = evaluation_logs(evaluation, details=details)
    compile_error = first_compile_error(evaluation) if details else None
    reverification = submission.reverifications.select_related(
        "evaluation", "checked_evaluation"
    ).first()
    # Once a re-verification's evaluation is the latest (the one that counts), the first one it
    # checked stays on the page below it, labelled.
    first = None
    if evaluation is not None and evaluation.purpose == Evaluation.Purpose.REVERIFY:
        first = (reverification.checked_evaluation if reverification else None) or (
            submission.evaluations.filter(purpose=Evaluation.Purpose.SUBMISSION)
            .order_by("-finished_at", "-id")
            .first()
        )
    ranking = submission_ranking(submission) if evaluation is not None else None
    # Every evaluation, labelled by what it was, with its own figures; the latest is the result.
    evaluations = submission_evaluations(submission)
    return {
        "submission": submission,
        "evaluation": evaluation,
        "reverification": reverification,
        "timing_comparison": Reverification.timing_comparison(
            reverification.evaluation if reverification else None
        ),
        "ranking": ranking,
        "ranking_label": RANKING_LABELS.get(ranking["detail"], "") if ranking else "",
        "evaluations": evaluations,
        "evaluation_label": evaluations[-1]["label"] if evaluations else "",
        # Whose figures the result carries, where a re-verification decided it.
        "ranked_figure": ranked_figure(evaluation),
        # Submitted to settled, with the queue wait apart (None until settled).
        "took": submission_took(submission, evaluations),
        "timing_floor_pct": round(100 * settings.TIMING_INTERVAL_FLOOR, 2),
        # The owner (and staff) may ask for another attempt at a result held on its timing.
        "can_reverify": owner and evaluation is not None and held_on_timing(submission),
        "reverify_per_day": reverifications_per_day(),
        # The owner (and staff) may cancel it while it waits or runs.
        "can_cancel": submission.is_open and may_cancel(submission, request.user),
        "first_evaluation": first,
        "first_logs": evaluation_logs(first, details=details),
        # Each trial's numbers; its text (error, note, diagnosis) with details only.
        "trials": shown_trials(evaluation, details=details),
        "first_trials": shown_trials(first, details=details),
        # Logs as shown: terminal escapes stripped, cut with a marker; the template escapes.
        # Without details: the generic error, no logs.
        "logs": logs,
        "show_code": details,
        "show_logs": details,
        "show_seeds": owner,
        "can_ask": owner,
        # The compiler's first error at the submitted file's line, above the folded full log.
        "compile_error": compile_error,
        # The line the code view marks: the compiler's first error's, else the traceback's.
        "failing_at": (
            f'File "candidate.py", line {compile_error["source_line"]}'
            if compile_error and compile_error["source_line"] else logs.get("traceback", "")
        ),
        # Kernel names tell about the code: where the time goes follows the source too, and its
        # reference side the reference.
        "profile": shown_profile(profile_view(evaluation), reference=reference)
        if evaluation is not None and details else None,
    }


def _submission_or_404(request, pk: int, *related: str) -> Submission:
    """The submission, where it is there for this user (selectors.can_see_submission)."""
    submission = get_object_or_404(Submission.objects.select_related("problem", *related), pk=pk)
    if not can_see_submission(submission, request.user):
        raise Http404("No such submission.")
    return submission


def submission_detail(request, pk: int):
    submission = _submission_or_404(request, pk, "hardware", "user", "model")
    context = _evaluation_context(request, submission)
    context["status"] = submission_status_payload(submission, details=context["show_logs"])
    if context["show_logs"] and submission.status == Submission.Status.FINISHED:
        context.update(_ncu_context(request, submission), ncu_section=True)
    return render(request, "submissions/detail.html", context)


def submission_evaluation(request, pk: int):
    """The evaluation part of the submission page, fetched by the page when a result lands."""
    submission = _submission_or_404(request, pk)
    return render(
        request, "submissions/_evaluation.html", _evaluation_context(request, submission)
    )


@require_GET
def submission_source(request, pk: int):
    """The submitted file itself, as a plain-text attachment (never rendered by the browser).

    Owner and admins always; others only when the problem makes code public.
    """
    submission = get_object_or_404(Submission.objects.select_related("problem"), pk=pk)
    if not can_see_source(submission, request.user):
        raise PermissionDenied("The code of this submission is not public.")
    filename = clean_filename(submission.filename) or f"submission-{submission.pk}.py"
    response = HttpResponse(submission.source, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, filename)
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response


def submission_status(request, pk: int):
    """Polling fallback for clients without websockets."""
    submission = _submission_or_404(request, pk)
    details = can_see_source(submission, request.user)
    return JsonResponse(submission_status_payload(submission, details=details))


@login_required
def my_submissions(request):
    filters = SubmissionFilterForm(request.GET or None)
    _human_choices(filters.fields["backend"])
    values = filters.cleaned_data if filters.is_valid() else {}
    submissions = user_submissions(user=request.user, filters=values)
    page = Paginator(submissions, 50).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "submissions/list.html",
        {"page": page, "filters": filters, "query": query.urlencode()},
    )


# ---- API docs -----------------------------------------------------------------------------------


def api_docs(request):
    """Swagger UI when its assets come from an installed package (drf-spectacular-sidecar);
    otherwise a plain page of the operations, rendered here from the same schema.

    The split view serves Swagger's start-up script as a file (?script), and our template drops
    drf-spectacular's inline <style>, so the page runs under the site's content security policy.
    """
    if (
        apps.is_installed("drf_spectacular_sidecar")
        and spectacular_settings.SWAGGER_UI_DIST == "SIDECAR"
    ):
        return SpectacularSwaggerSplitView.as_view(
            url_name="api_schema", template_name="submissions/swagger_ui.html"
        )(request)
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operations = [
        {"path": path, "method": method.upper(), **operation}
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
    ]
    return render(request, "submissions/api_docs.html", {"schema": schema, "ops": operations})


def _ncu_context(request, submission: Submission) -> dict:
    reports = list(submission.ncu_reports.defer("report")[:5])
    latest_done = next((r for r in reports if r.status == NcuReport.Status.DONE), None)
    evaluation = submission.latest_evaluation
    return {
        "submission": submission,
        "ncu_reports": reports,
        "ncu_open": any(r.is_open for r in reports),
        "ncu_per_day": ncu_reports_per_day(),
        "can_ask": can_act_on(submission, request.user),
        "ncu_profile": shown_profile(
            profile_view(evaluation, ncu_kernels=latest_done.kernels)
            if latest_done and evaluation is not None else None,
            reference=can_see_reference(submission, request.user),
        ),
    }


def submission_ncu(request, pk: int):
    """The Nsight Compute part of the submission page: GET renders it for whoever may see the
    source (the page fetches it again while a report is open); POST asks for a new report
    (owner and staff)."""
    submission = get_object_or_404(
        Submission.objects.select_related("hardware", "problem"), pk=pk
    )
    if not can_see_source(submission, request.user):
        raise PermissionDenied("The code of this submission is not public, nor its profiles.")
    if request.method == "POST":
        if not can_act_on(submission, request.user):
            raise PermissionDenied("Only the submission's owner and staff ask for profiles.")
        try:
            ncu_report_request(user=request.user, submission=submission)
            messages.success(request, "Nsight Compute report queued; it appears below when "
                                      "a runner has made it.")
        except (NcuRequestError, QuotaExceeded) as error:
            messages.error(request, error.message)
        return redirect(f"{submission.get_absolute_url()}#ncu")
    return render(request, "submissions/_ncu.html", _ncu_context(request, submission))


@require_POST
@login_required
def submission_reverify(request, pk: int):
    """Another attempt at re-verification of a held result (owner and staff, within quota)."""
    submission = get_object_or_404(Submission, pk=pk)
    if not can_act_on(submission, request.user):
        raise PermissionDenied("Only the submission's owner and staff can ask for this.")
    try:
        reverification_request_by_owner(user=request.user, submission=submission)
        messages.success(request, "Re-verification queued: it is evaluated again with fresh "
                                  "seeds, and this page shows the outcome.")
    except (ReverificationError, QuotaExceeded) as error:
        messages.error(request, error.message)
    return redirect(f"{submission.get_absolute_url()}#ranking")


@require_POST
@login_required
def submission_cancel_view(request, pk: int):
    """Cancel a queued or running submission from its page (owner and staff)."""
    submission = _submission_or_404(request, pk)
    try:
        submission_cancel(submission=submission, user=request.user)
        messages.success(request, "Cancelled: it will not be evaluated (a running evaluation "
                                  "is stopped within seconds), and its reserved evaluation "
                                  "time is released.")
    except CancelError as error:
        if error.code == "forbidden":
            raise PermissionDenied(error.message) from None
        messages.error(request, error.message)
    return redirect(submission.get_absolute_url())


@require_GET
def submission_ncu_report(request, pk: int, report_pk: int):
    """The .ncu-rep file, for Nsight Compute's UI (whoever may see the source)."""
    submission = get_object_or_404(Submission.objects.select_related("problem"), pk=pk)
    if not can_see_source(submission, request.user):
        raise PermissionDenied("The code of this submission is not public, nor its profiles.")
    report = get_object_or_404(NcuReport, pk=report_pk, submission=submission)
    if not report.has_file:
        raise Http404("This report has no file.")
    response = HttpResponse(bytes(report.report), content_type="application/octet-stream")
    response["Content-Disposition"] = content_disposition_header(
        True, f"submission-{submission.pk}-ncu-{report.pk}.ncu-rep"
    )
    response["Cache-Control"] = "private, no-store"
    return response
