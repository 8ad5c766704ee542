"""Included under /api/v1/leaderboard/ (see submissions/api_urls.py)."""

from django.urls import path

from leaderboard import api

urlpatterns = [
    # A problem's board by its slug (level1/19_ReLU/, or level1/19/), or by level and number.
    path(
        "boards/level<int:level>/<str:name>/<slug:hardware>/",
        api.BoardApi.as_view(),
        name="api_leaderboard_board",
    ),
    path(
        "boards/<int:level>/<int:number>/<slug:hardware>/",
        api.BoardByNumberApi.as_view(),
        name="api_leaderboard_board_number",
    ),
    path("models/", api.ModelsTableApi.as_view(), name="api_leaderboard_models"),
    path("models/<int:pk>/", api.ModelApi.as_view(), name="api_leaderboard_model"),
    path("runs/<int:pk>/", api.RunApi.as_view(), name="api_leaderboard_run"),
    path(
        "runs/<int:pk>/eval_results.json",
        api.RunEvalResultsApi.as_view(),
        name="api_leaderboard_run_eval_results",
    ),
    path("users/<str:username>/", api.UserApi.as_view(), name="api_leaderboard_user"),
    path("records/", api.RecordsApi.as_view(), name="api_leaderboard_records"),
]
