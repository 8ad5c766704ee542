"""Competition pages: the list, a competition (rules, problems, standings, entering), a person's
entries. The standings download as CSV or JSON (?format=csv|json), like every table."""

from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from competitions.forms import EntryForm, competition_backends, competition_precisions
from competitions.models import Competition, Entry
from competitions.services import (
    CompetitionError,
    competition_standings,
    competition_submit,
    entries_left_today,
)
from leaderboard.exports import export_response
from problems.selectors import problem_by_name
from problems.starters import StarterError, starter_source
from submissions.errors import SubmissionError

STANDINGS_COLUMNS = ["rank", "user", "points", "solved", "reached_at"]


def _standings_table(competition: Competition, standings: list[dict], *, user) -> dict:
    """The standings as the page shows them: a column per problem, each row's cells in that
    order (points, time, attempts; empty where the person did not try it)."""
    slugs = list(
        competition.problems.visible_to(user).order_by("level", "number").values_list(
            "slug", flat=True
        )
    )
    rows = [{**row, "cells": [row["problems"].get(slug) for slug in slugs]} for row in standings]
    return {"standings": rows, "problem_slugs": slugs}


def _visible(request):
    competitions = Competition.objects.select_related("hardware")
    return competitions if request.user.is_staff else competitions.filter(published=True)


def competition_list(request):
    now = timezone.now()
    competitions = list(_visible(request))
    groups = {phase: [] for phase in Competition.Phase.values}
    for competition in competitions:
        groups[competition.phase(now)].append(competition)
    return render(request, "competitions/list.html", {"groups": groups})


def competition_detail(request, slug: str):
    competition = get_object_or_404(_visible(request), slug=slug)
    standings = competition_standings(competition)
    # The file is named SLUG-standings.csv: export_response adds the table's name.
    download = export_response(
        request, {"standings": (STANDINGS_COLUMNS, standings)}, basename=slug
    )
    if download:
        return download
    form = None
    status = 200
    if request.user.is_authenticated and competition.phase() != Competition.Phase.UPCOMING:
        form = EntryForm(request.POST or None, request.FILES or None, competition=competition)
        # Only the problems this user may submit to: a draft or held one is not there for them.
        problem_field = form.fields["problem"]
        problem_field.queryset = problem_field.queryset.open_for_submissions(request.user)
        if request.method == "GET":
            _start_from_starter(request, form, competition=competition)
        if request.method == "POST":
            status = 400
            if form.is_valid():
                data = form.cleaned_data
                try:
                    source, filename = form.kernel_source()
                    entry = competition_submit(
                        competition=competition,
                        user=request.user,
                        problem=data["problem"],
                        source=source,
                        backend=data["backend"],
                        precision=data["precision"],
                        filename=filename,
                    )
                except (CompetitionError, SubmissionError) as error:
                    form.add_error(None, error.message)
                    status = 429 if error.code == "daily_limit" else 400
                else:
                    return redirect(entry.submission)
    return render(
        request,
        "competitions/detail.html",
        {
            "competition": competition,
            "phase": competition.phase(),
            "backends": competition_backends(competition),
            "precisions": competition_precisions(competition),
            "problems": competition.problems.visible_to(request.user).order_by("level", "number"),
            **_standings_table(competition, standings, user=request.user),
            "form": form,
            "left_today": (
                entries_left_today(competition=competition, user=request.user)
                if request.user.is_authenticated
                else None
            ),
        },
        status=status,
    )


def _start_from_starter(request, form: EntryForm, *, competition: Competition) -> None:
    """?problem=SLUG&backend=B (the page's starter picker; the problem also as 1/19): the form
    starts from that problem's starter kernel in that backend, where the user may see the
    reference it contains."""
    name = request.GET.get("problem", "")
    problem = problem_by_name(form.fields["problem"].queryset, name=name)
    if problem is None:
        return
    form.initial["problem"] = problem
    backend = request.GET.get("backend", "")
    if backend not in competition_backends(competition):
        return
    form.initial["backend"] = backend
    if problem.reference_visible_to(request.user):
        try:
            form.initial["source"] = starter_source(problem=problem, backend=backend)
        except StarterError:
            pass  # a reference without a Model class: nothing to start from


def competition_standings_part(request, slug: str):
    """The standings table alone: what the page fetches when told they changed."""
    competition = get_object_or_404(_visible(request), slug=slug)
    standings = competition_standings(competition)
    return render(
        request,
        "competitions/_standings.html",
        {
            "competition": competition,
            **_standings_table(competition, standings, user=request.user),
        },
    )


def competition_person(request, slug: str, username: str):
    competition = get_object_or_404(_visible(request), slug=slug)
    person = get_object_or_404(get_user_model(), username=username)
    entries = Entry.objects.filter(competition=competition, user=person).select_related(
        "submission", "problem"
    )
    return render(
        request,
        "competitions/person.html",
        {"competition": competition, "person": person, "entries": entries},
    )
