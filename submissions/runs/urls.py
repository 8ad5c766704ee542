"""Run pages (included under "runs/") and the run API (`api_urlpatterns`: /api/v1/runs/...)."""

from django.urls import path

from submissions.runs import api, views

urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("<int:pk>/", views.run_detail, name="run_detail"),
    path("<int:pk>/status.json", views.run_status, name="run_status"),
    path("<int:pk>/<slug:action>/", views.run_action, name="run_action"),
]

api_urlpatterns = [
    path("v1/runs/", api.RunListCreateApi.as_view(), name="api_runs"),
    path("v1/runs/<int:pk>/", api.RunDetailApi.as_view(), name="api_run"),
    path("v1/runs/<int:pk>/start/", api.RunStartApi.as_view(), name="api_run_start"),
    path("v1/runs/<int:pk>/stop/", api.RunStopApi.as_view(), name="api_run_stop"),
    path("v1/runs/<int:pk>/resume/", api.RunResumeApi.as_view(), name="api_run_resume"),
]
