from django.contrib import admin
from django.urls import include, path

from kbsite import views

urlpatterns = [
    path("", views.home, name="home"),
    path("admin/", admin.site.urls),
    path("highlight.css", views.pygments_css, name="pygments_css"),
    path("accounts/", include("submissions.account_urls")),
    path("accounts/logout/", views.LogoutView.as_view(), name="logout"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("problems/", include("problems.urls")),
    path("hardware/", include("evaluation.urls")),
    path("submissions/", include("submissions.urls")),
    path("leaderboard/", include("leaderboard.urls")),
    path("competitions/", include("competitions.urls")),
    path("runs/", include("submissions.run_urls")),
    path("api/v1/competitions/", include("competitions.api_urls")),
    path("api/", include("submissions.api_urls")),
]
