from django.urls import path

from leaderboard import views

urlpatterns = [
    path("", views.leaderboard_home, name="leaderboard_home"),
    path("<int:level>/<int:number>/<slug:hardware>/", views.problem_board, name="problem_board"),
    # Another precision's board of the problem (the path above is its own precision's).
    path(
        "<int:level>/<int:number>/<slug:hardware>/<slug:precision>/",
        views.problem_board,
        name="problem_board_precision",
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
