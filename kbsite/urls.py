from django.contrib import admin
from django.urls import include, path
from django.views.generic import TemplateView

from kbsite import views

urlpatterns = [
    path("", views.home, name="home"),
    path("admin/", admin.site.urls),
    path("highlight.css", views.pygments_css, name="pygments_css"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("accounts/", include("accounts.urls")),
    path("accounts/logout/", views.LogoutView.as_view(), name="logout"),
    # Sign-up asks for no email, so no reset link can be sent: these pages say what to do
    # instead, ahead of django.contrib.auth's, which would claim an email was sent.
    path(
        "accounts/password_reset/",
        TemplateView.as_view(template_name="registration/password_reset_form.html"),
        name="password_reset",
    ),
    path(
        "accounts/password_reset/done/",
        TemplateView.as_view(template_name="registration/password_reset_form.html"),
        name="password_reset_done",
    ),
    path("accounts/", include("django.contrib.auth.urls")),
    path("problems/", include("problems.urls")),
    path("hardware/", include("evaluation.urls")),
    path("submissions/", include("submissions.urls")),
    path("leaderboard/", include("leaderboard.urls")),
    path("competitions/", include("competitions.urls")),
    path("runs/", include("submissions.runs.urls")),
    path("api/v1/competitions/", include("competitions.api_urls")),
    path("api/v1/tokens/", include("accounts.api_urls")),
    path("api/", include("submissions.api_urls")),
]
