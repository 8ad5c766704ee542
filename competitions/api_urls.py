"""Included under /api/v1/competitions/ (see kbsite/urls.py)."""

from django.urls import path

from competitions import api

urlpatterns = [
    path("", api.CompetitionListApi.as_view(), name="api_competitions"),
    path("<slug:slug>/", api.CompetitionDetailApi.as_view(), name="api_competition"),
    path("<slug:slug>/entries/", api.CompetitionEntryApi.as_view(), name="api_competition_enter"),
]
