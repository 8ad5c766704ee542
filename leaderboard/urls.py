from django.urls import path

from leaderboard import views

urlpatterns = [
    path("<int:level>/<int:number>/<slug:hardware>/", views.problem_board, name="problem_board"),
]
