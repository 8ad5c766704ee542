from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render

from submissions.forms import SubmissionForm
from submissions.models import Submission
from submissions.selectors import submission_status_payload
from submissions.services import SubmissionError, decode_source, submission_create


@login_required
def submission_new(request):
    initial = {}
    if "problem" in request.GET:
        initial["problem"] = request.GET["problem"]
    form = SubmissionForm(request.POST or None, request.FILES or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        upload = data.get("source_file")
        try:
            source = decode_source(upload.read()) if upload else data["source"]
            submission = submission_create(
                user=request.user,
                problem=data["problem"],
                source=source,
                backend=data["backend"],
                hardware=data["hardware"],
                precision=data["precision"],
                filename=upload.name if upload else "",
            )
        except SubmissionError as error:
            form.add_error(None, error.message)
        else:
            return redirect(submission)
    status = 400 if request.method == "POST" else 200
    return render(request, "submissions/new.html", {"form": form}, status=status)


def submission_detail(request, pk: int):
    submission = get_object_or_404(
        Submission.objects.select_related("problem", "hardware", "user", "model"), pk=pk
    )
    evaluation = submission.latest_evaluation
    return render(
        request,
        "submissions/detail.html",
        {
            "submission": submission,
            "evaluation": evaluation,
            "show_code": submission.code_visible_to(request.user),
            "status": submission_status_payload(submission),
        },
    )


def submission_status(request, pk: int):
    """Polling fallback for clients without websockets."""
    submission = get_object_or_404(Submission, pk=pk)
    return JsonResponse(submission_status_payload(submission))


@login_required
def my_submissions(request):
    submissions = Submission.objects.filter(user=request.user).select_related(
        "problem", "hardware"
    )
    for field in ("status", "verdict", "backend"):
        value = request.GET.get(field)
        if value:
            submissions = submissions.filter(**{field: value})
    return render(
        request,
        "submissions/list.html",
        {"submissions": submissions[:200], "filters": request.GET},
    )
