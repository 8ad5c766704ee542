"""Account pages under /accounts/ (log in and out come from django.contrib.auth.urls)."""

from django.urls import path

from accounts import views

urlpatterns = [
    path("signup/", views.signup, name="signup"),
    path("profile/", views.profile, name="profile"),
    path("tokens/new/", views.token_create, name="token_create"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token_revoke"),
    path("verify-email/send/", views.verification_resend, name="email_verification_send"),
    path("verify-email/<str:token>/", views.verify_email, name="email_verify"),
]
