"""REST API routes (/api/...): v1 endpoints, the OpenAPI schema and its docs page."""

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView

from submissions import api, events, starter_api, views
from submissions.runs import urls as run_urls

urlpatterns = [
    path("v1/problems/", api.ProblemListApi.as_view(), name="api_problems"),
    # A problem by its slug, level1/19_ReLU/ (or level1/19/), and by level and number, 1/19/
    # (problems.selectors). The slug's two parts are two segments, not a greedy path, so that
    # starter/ after it is a route of its own.
    path(
        "v1/problems/level<int:level>/<str:name>/",
        api.ProblemDetailApi.as_view(),
        name="api_problem_detail",
    ),
    path(
        "v1/problems/<int:level>/<int:number>/",
        api.ProblemByNumberApi.as_view(),
        name="api_problem_detail_number",
    ),
    path(
        "v1/problems/level<int:level>/<str:name>/starter/",
        starter_api.ProblemStarterApi.as_view(),
        name="api_problem_starter",
    ),
    path(
        "v1/problems/<int:level>/<int:number>/starter/",
        starter_api.ProblemStarterByNumberApi.as_view(),
        name="api_problem_starter_number",
    ),
    path("v1/hardware/", api.HardwareListApi.as_view(), name="api_hardware"),
    path("v1/submissions/", api.SubmissionListCreateApi.as_view(), name="api_submissions"),
    path("v1/submissions/batch/", api.SubmissionBatchApi.as_view(), name="api_submission_batch"),
    path(
        "v1/submissions/<int:pk>/",
        api.SubmissionDetailApi.as_view(),
        name="api_submission_detail",
    ),
    path(
        "v1/submissions/<int:pk>/events/",
        events.submission_events,
        name="api_submission_events",
    ),
    path(
        "v1/submissions/<int:pk>/reverify/",
        api.SubmissionReverifyApi.as_view(),
        name="api_submission_reverify",
    ),
    path(
        "v1/submissions/<int:pk>/cancel/",
        api.SubmissionCancelApi.as_view(),
        name="api_submission_cancel",
    ),
    path("v1/batches/<int:pk>/", api.BatchDetailApi.as_view(), name="api_batch_detail"),
    path("v1/batches/<int:pk>/cancel/", api.BatchCancelApi.as_view(), name="api_batch_cancel"),
    path(
        "v1/submissions/<int:pk>/ncu/",
        api.NcuReportListCreateApi.as_view(),
        name="api_submission_ncu",
    ),
    path(
        "v1/submissions/<int:pk>/ncu/<int:report_pk>/",
        api.NcuReportDetailApi.as_view(),
        name="api_submission_ncu_detail",
    ),
    path("v1/quota/", api.QuotaApi.as_view(), name="api_quota"),
    path("v1/leaderboard/", include("leaderboard.api_urls")),
    # Model runs (/api/v1/runs/...), defined with the run pages.
    path("", include(run_urls.api_urlpatterns)),
    path("schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("docs/", views.api_docs, name="api_docs"),
    # Last: any other /api/ path (an unknown one, or an id that is not a number) answers a
    # JSON 404 in the API's error shape rather than the site's HTML page.
    re_path(r"^[\s\S]*$", api.not_found, name="api_not_found"),
]
