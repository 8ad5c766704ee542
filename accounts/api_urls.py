"""Included under /api/v1/tokens/ (see kbsite/urls.py)."""

from django.urls import path

from accounts import api

urlpatterns = [
    path("", api.TokenListCreateApi.as_view(), name="api_tokens"),
    path("<int:pk>/", api.TokenDetailApi.as_view(), name="api_token_detail"),
]
