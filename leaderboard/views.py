"""Leaderboard pages. Every table on a page downloads as CSV or JSON with
?format=csv|json&table=<name>; the REST API (leaderboard/api.py) serves the same data."""

from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db.models import Case, Subquery, When
from django.http import Http404
from django.shortcuts import get_object_or_404, render
from django.utils import timezone

from evaluation import metrics
from evaluation.models import Hardware
from kbsite import svg
from leaderboard import selectors
from leaderboard.exports import COLUMNS, export_response, json_download
from leaderboard.forms import TableFilterForm
from leaderboard.models import Record
from problems.models import Problem
from problems.selectors import asked_name, problem_by_name
from submissions.models import Submission
from submissions.runs.models import Model, Run
from submissions.selectors import can_see_submission


def _filters(request) -> TableFilterForm:
    """The tables' filters from the query; without a hardware asked for, the default one
    (selectors.default_hardware), so that a visitor lands on a table with data. An empty
    `hardware=` asks for every hardware."""
    data = request.GET.copy()
    if "hardware" not in data:
        default = selectors.default_hardware()
        if default is not None:
            data["hardware"] = default.slug
    return TableFilterForm(data or None)


def _fast_p_series(rows: list[dict], *, name_key: str) -> list[tuple[str, dict[float, float]]]:
    return [(r[name_key], {float(p): v for p, v in r["fast_p"].items()}) for r in rows]


def _by_level(boards: list[dict]) -> list[dict]:
    """The boards grouped by level, each group with its totals (boards listed in order)."""
    levels: dict[int, dict] = {}
    for board in boards:
        group = levels.setdefault(
            board["level"], {"level": board["level"], "boards": [], "ranked": 0}
        )
        group["boards"].append(board)
        group["ranked"] += board["ranked"]
    return list(levels.values())


def problem_board(
    request,
    level: int,
    hardware: str,
    name: str = "",
    number: int | None = None,
    precision: str | None = None,
):
    """One board: a problem (by slug, or by level and number) on a hardware in one precision,
    the problem's own (its main board) at the path without a precision, another one's at
    .../<precision>/."""
    problem = problem_by_name(
        Problem.objects.visible_to(request.user), level=level, name=name, number=number
    )
    if problem is None:
        raise Http404(f"There is no problem {asked_name(level=level, name=name, number=number)}.")
    hardware = get_object_or_404(Hardware, slug=hardware)
    if precision is not None and precision not in Problem.Precision.values:
        raise Http404(f"There is no {precision} board.")
    board = {"problem": problem, "hardware": hardware,
             "precision": selectors.board_precision(problem, precision)}
    fields = selectors.board_fields(board["precision"], problem.precision)
    rows = selectors.board_rows(**board)
    flagged = selectors.flagged_rows(**board)
    records = selectors.record_rows(**board)
    basename = f"{problem.slug.replace('/', '-')}-{hardware.slug}"
    download = export_response(
        request,
        {
            "board": (COLUMNS["board"], rows),
            "flagged": (COLUMNS["flagged"], flagged),
            "records": (COLUMNS["records"], records),
        },
        basename=basename if fields["main_board"] else f"{basename}-{board['precision']}",
    )
    if download:
        return download
    points = [
        (r.achieved_at, r.candidate_median_ms, r.participant)
        for r in Record.objects.filter(**board).order_by("achieved_at", "id")
    ]
    title = f"Record for {problem.slug} on {hardware.slug}"
    return render(
        request,
        "leaderboard/problem_board.html",
        {
            "problem": problem,
            "hardware": hardware,
            **fields,
            "boards": selectors.problem_boards(problem=problem, hardware=hardware),
            "rows": rows,
            "board_reference_ms": selectors.board_reference(
                problem_id=problem.pk, hardware_id=hardware.pk, precision=board["precision"]
            ),
            "flagged": flagged,
            "records": records,
            "record_chart": svg.record_chart(
                points, now=timezone.now(),
                title=title if fields["main_board"] else f"{title}, {fields['board']}",
            ),
            "all_hardware": Hardware.objects.all(),
        },
    )


def leaderboard_home(request):
    form = _filters(request)
    if form.is_bound and not form.is_valid():
        return render(request, "leaderboard/home.html", {"form": form}, status=400)
    data = form.cleaned_data if form.is_bound else {}
    baseline = data.get("baseline") or "eager"
    hardware = data.get("hardware")
    level = data.get("level")
    models = selectors.models_table(hardware=hardware, level=level, baseline=baseline)
    records = selectors.recent_records(limit=20, hardware=hardware)
    busiest = selectors.busiest_problems(limit=10)
    boards = selectors.board_index(hardware=hardware, level=level)
    download = export_response(
        request,
        {
            "models": (COLUMNS["models"], models),
            "records": (COLUMNS["records"], records),
            "busiest": (COLUMNS["busiest"], busiest),
            "boards": (COLUMNS["boards"], boards),
        },
        basename="leaderboard",
    )
    if download:
        return download
    # The charts compare models on one hardware and level: the chosen ones, else the first
    # that has results.
    chart_hw = hardware.slug if hardware else (models[0]["hardware"] if models else None)
    chart_level = level or min(
        (r["level"] for r in models if r["hardware"] == chart_hw), default=None
    )
    chart_rows = [r for r in models if r["hardware"] == chart_hw and r["level"] == chart_level]
    speedups = []
    if chart_hw and chart_level:
        speedups = selectors.model_speedups(
            hardware=Hardware.objects.get(slug=chart_hw), level=chart_level, baseline=baseline
        )
    where = f"level {chart_level} on {chart_hw}" if chart_hw else ""
    return render(
        request,
        "leaderboard/home.html",
        {
            "form": form,
            "models": models,
            "records": records,
            "busiest": busiest,
            "board_levels": _by_level(boards),
            "thresholds": [selectors.p_label(p) for p in metrics.FAST_P_THRESHOLDS],
            "baseline": baseline,
            "live_hardware": hardware.slug if hardware else "",
            # New model rows arrive live for the hardware shown; a level filter keeps them out
            # (boards.js cannot tell a row's level).
            "filtered": bool(level),
            "fast_p_chart": svg.fast_p_chart(
                _fast_p_series(chart_rows, name_key="model"), title=f"fast_p, {where}"
            ),
            "histogram": svg.histogram_chart(
                metrics.histogram(speedups, edges=svg.SPEEDUP_EDGES),
                title=f"Speedups of correct kernels, {where}",
            ),
        },
    )


def leaderboard_model(request, pk: int):
    model = get_object_or_404(Model, pk=pk)
    form = TableFilterForm(request.GET or None)
    if request.GET and not form.is_valid():
        return render(request, "leaderboard/model.html", {"model": model, "form": form}, status=400)
    baseline = (form.cleaned_data.get("baseline") if form.is_bound else None) or "eager"
    summary = selectors.models_table(model_id=model.pk, baseline=baseline)
    entries = selectors.participant_entries(model=model)
    runs = [
        row
        for run in Run.objects.filter(model=model).select_related("hardware", "model")
        for row in selectors.run_summary(run, baseline=baseline)
    ]
    download = export_response(
        request,
        {
            "summary": (COLUMNS["models"], summary),
            "entries": (COLUMNS["entries"], entries),
            "runs": (COLUMNS["runs"], runs),
        },
        basename=f"model-{model.pk}",
    )
    if download:
        return download
    speedups = [
        r["speedup_compile"]
        if baseline == "compile"
        else (r["speedup"] if r["speedup"] is not None else r["speedup_eager"])
        for r in entries
        if r["rank"] is not None and not r["retired"]
    ]
    return render(
        request,
        "leaderboard/model.html",
        {
            "model": model,
            "form": form,
            "summary": summary,
            "entries": entries,
            "runs": runs,
            "baseline": baseline,
            "thresholds": [selectors.p_label(p) for p in metrics.FAST_P_THRESHOLDS],
            "fast_p_chart": svg.fast_p_chart(
                [
                    (
                        f"level {r['level']} on {r['hardware']}",
                        {float(p): v for p, v in r["fast_p"].items()},
                    )
                    for r in summary
                ],
                title=f"fast_p of {model}",
            ),
            "histogram": svg.histogram_chart(
                metrics.histogram([s for s in speedups if s is not None], edges=svg.SPEEDUP_EDGES),
                title=f"Speedups of {model}'s correct kernels",
            ),
        },
    )


def leaderboard_run(request, pk: int):
    run = get_object_or_404(Run.objects.select_related("model", "hardware"), pk=pk)
    form = TableFilterForm(request.GET or None)
    if request.GET and not form.is_valid():
        return render(request, "leaderboard/run.html", {"run": run, "form": form}, status=400)
    baseline = (form.cleaned_data.get("baseline") if form.is_bound else None) or "eager"
    summary = selectors.run_summary(run, baseline=baseline)
    download = export_response(
        request, {"summary": (COLUMNS["runs"], summary)}, basename=f"run-{run.pk}"
    )
    if download:
        return download
    return render(
        request,
        "leaderboard/run.html",
        {
            "run": run,
            "form": form,
            "summary": summary,
            "baseline": baseline,
            "thresholds": [selectors.p_label(p) for p in metrics.FAST_P_THRESHOLDS],
            "ks": sorted({k for r in summary for k in r["pass_at_k"]}),
            "fast_p_chart": svg.fast_p_chart(
                _fast_p_series(summary, name_key="run"), title=f"fast_p of run {run.name}"
            ),
        },
    )


def leaderboard_run_eval_results(request, pk: int):
    """The run in KernelBench's eval_results.json layout."""
    run = get_object_or_404(Run.objects.select_related("hardware"), pk=pk)
    level = request.GET.get("level")
    if level is not None and not level.isdigit():
        return render(
            request,
            "leaderboard/error.html",
            {"message": f"level must be a number, not {level!r}."},
            status=400,
        )
    try:
        data = selectors.run_eval_results(
            run, level=int(level) if level else None, viewer=request.user
        )
    except ValueError as error:
        return render(request, "leaderboard/error.html", {"message": str(error)}, status=400)
    return json_download(data, filename=f"run-{run.pk}-eval_results.json")


def leaderboard_user(request, username: str):
    person = get_object_or_404(get_user_model(), username=username)
    entries = selectors.participant_entries(user=person)
    download = export_response(
        request, {"entries": (COLUMNS["entries"], entries)}, basename=f"user-{person.username}"
    )
    if download:
        return download
    return render(
        request,
        "leaderboard/user.html",
        {
            "person": person,
            "entries": entries,
            "ranked": sum(1 for e in entries if e["rank"] is not None),
            "firsts": sum(1 for e in entries if e["rank"] == 1),
        },
    )


PEOPLE_PER_PAGE = 100


def leaderboard_people(request):
    """People ranked per hardware and level over their best verified results."""
    form = _filters(request)
    if form.is_bound and not form.is_valid():
        return render(request, "leaderboard/people.html", {"form": form}, status=400)
    data = form.cleaned_data if form.is_bound else {}
    baseline = data.get("baseline") or "eager"
    people = selectors.people_table(
        hardware=data.get("hardware"), level=data.get("level"), baseline=baseline
    )
    download = export_response(request, {"people": (COLUMNS["people"], people)}, basename="people")
    if download:
        return download
    # A row a person, hardware and level: thousands on a busy site, so the page shows them a
    # page at a time (the downloads have them all).
    page = Paginator(people, PEOPLE_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "leaderboard/people.html",
        {
            "form": form,
            "people": page,
            "page": page,
            "query": query.urlencode(),
            "baseline": baseline,
        },
    )


def _submission_id(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


PICKER_SIZE = 50


def _compare_choices(request, a_id: int | None) -> list[Submission]:
    """The viewer's own latest submissions to pick from, those of submission a's problem
    first (a submission's page links here with ?a=ID)."""
    if not request.user.is_authenticated:
        return []
    mine = Submission.objects.filter(user=request.user).select_related("problem")
    first = Submission.objects.filter(pk=a_id).values("problem_id")[:1] if a_id else None
    if first is not None:
        mine = mine.annotate(
            same=Case(When(problem_id=Subquery(first), then=0), default=1)
        ).order_by("same", "-pk")
    else:
        mine = mine.order_by("-pk")
    return list(mine.only("pk", "backend", "verdict", "status", "problem__slug")[:PICKER_SIZE])


def submissions_compare(request):
    """Two submissions side by side: verdicts, timings, phases, and their code as a diff."""
    a_id, b_id = _submission_id(request.GET.get("a")), _submission_id(request.GET.get("b"))
    if a_id is None or b_id is None:
        # The picker alone (a submission's page links here with ?a=ID), or what is wrong.
        asked = bool(request.GET.get("b")) or (bool(request.GET.get("a")) and a_id is None)
        return render(
            request,
            "leaderboard/compare.html",
            {
                "message": "Give two submission numbers, e.g. ?a=12&b=15." if asked else "",
                "a_value": a_id or "",
                "choices": _compare_choices(request, a_id),
            },
            status=400 if asked else 200,
        )
    found = Submission.objects.select_related("problem", "hardware", "user", "model").in_bulk(
        [a_id, b_id]
    )
    # A draft's or a held problem's submission is not there for others (can_see_submission).
    found = {pk: s for pk, s in found.items() if can_see_submission(s, request.user)}
    missing = [str(pk) for pk in (a_id, b_id) if pk not in found]
    if missing:
        return render(
            request,
            "leaderboard/compare.html",
            {
                "message": f"No submission {', '.join(missing)}.",
                "choices": _compare_choices(request, None),
            },
            status=404,
        )
    a, b = found[a_id], found[b_id]
    sides = [selectors.compare_side(s, viewer=request.user) for s in (a, b)]
    diff = None
    if all(side["code_visible"] for side in sides):
        diff = selectors.code_diff(
            a.source, b.source, a_name=f"submission {a.pk}", b_name=f"submission {b.pk}"
        )
    return render(
        request,
        "leaderboard/compare.html",
        {
            "sides": sides,
            "diff": diff,
            "a": a,
            "b": b,
            "same_problem": a.problem_id == b.problem_id,
            "choices": _compare_choices(request, a.pk),
        },
    )
