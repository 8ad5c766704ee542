from django.urls import path

from evaluation import views

urlpatterns = [
    path("", views.hardware_list, name="hardware_list"),
]
