from django.urls import path

from submissions import views

urlpatterns = [
    path("", views.my_submissions, name="my_submissions"),
    path("new/", views.submission_new, name="submission_new"),
    path("<int:pk>/", views.submission_detail, name="submission_detail"),
    path("<int:pk>/evaluation/", views.submission_evaluation, name="submission_evaluation"),
    path("<int:pk>/source/", views.submission_source, name="submission_source"),
    path("<int:pk>/status.json", views.submission_status, name="submission_status"),
    path("<int:pk>/reverify/", views.submission_reverify, name="submission_reverify"),
    path("<int:pk>/cancel/", views.submission_cancel_view, name="submission_cancel"),
    path("<int:pk>/ncu/", views.submission_ncu, name="submission_ncu"),
    path("<int:pk>/ncu/<int:report_pk>.ncu-rep", views.submission_ncu_report,
         name="submission_ncu_report"),
]
