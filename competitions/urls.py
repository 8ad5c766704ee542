from django.urls import path

from competitions import views

urlpatterns = [
    path("", views.competition_list, name="competition_list"),
    path("<slug:slug>/", views.competition_detail, name="competition_detail"),
    path("<slug:slug>/standings/", views.competition_standings_part, name="competition_standings"),
    path(
        "<slug:slug>/people/<str:username>/",
        views.competition_person,
        name="competition_person",
    ),
]
