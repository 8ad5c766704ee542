"""Run pages (included under "runs/") and the run API (`api_urlpatterns`: /api/v1/runs/...)."""

from django.urls import path

from submissions import run_api, run_views

urlpatterns = [
    path("", run_views.run_list, name="run_list"),
    path("<int:pk>/", run_views.run_detail, name="run_detail"),
    path("<int:pk>/status.json", run_views.run_status, name="run_status"),
    path("<int:pk>/<slug:action>/", run_views.run_action, name="run_action"),
]

api_urlpatterns = [
    path("v1/runs/", run_api.RunListCreateApi.as_view(), name="api_runs"),
    path("v1/runs/<int:pk>/", run_api.RunDetailApi.as_view(), name="api_run"),
    path("v1/runs/<int:pk>/start/", run_api.RunStartApi.as_view(), name="api_run_start"),
    path("v1/runs/<int:pk>/stop/", run_api.RunStopApi.as_view(), name="api_run_stop"),
    path("v1/runs/<int:pk>/resume/", run_api.RunResumeApi.as_view(), name="api_run_resume"),
]
