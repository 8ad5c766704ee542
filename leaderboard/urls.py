from django.urls import path

from leaderboard import views

urlpatterns = [
    path("", views.leaderboard_home, name="leaderboard_home"),
    # A problem's board by its slug, /leaderboard/level1/19_ReLU/h200/ (what links use), or by
    # /leaderboard/level1/19/h200/ (problems.selectors.problem_by_name).
    path(
        "level<int:level>/<str:name>/<slug:hardware>/",
        views.problem_board,
        name="problem_board",
    ),
    # Another precision's board of the problem (the path above is its own precision's).
    path(
        "level<int:level>/<str:name>/<slug:hardware>/<slug:precision>/",
        views.problem_board,
        name="problem_board_precision",
    ),
    # By level and number, the older form, which links made before slugs still use.
    path(
        "<int:level>/<int:number>/<slug:hardware>/",
        views.problem_board,
        name="problem_board_number",
    ),
    path(
        "<int:level>/<int:number>/<slug:hardware>/<slug:precision>/",
        views.problem_board,
        name="problem_board_precision_number",
    ),
    path("models/<int:pk>/", views.leaderboard_model, name="leaderboard_model"),
    path("people/", views.leaderboard_people, name="leaderboard_people"),
    path("compare/", views.submissions_compare, name="submissions_compare"),
    path("runs/<int:pk>/", views.leaderboard_run, name="leaderboard_run"),
    path(
        "runs/<int:pk>/eval_results.json",
        views.leaderboard_run_eval_results,
        name="leaderboard_run_eval_results",
    ),
    path("users/<str:username>/", views.leaderboard_user, name="leaderboard_user"),
]
