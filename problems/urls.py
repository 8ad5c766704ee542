from django.urls import path

from problems import views

urlpatterns = [
    path("", views.problem_list, name="problem_list"),
    path("<int:level>/<int:number>/", views.problem_detail, name="problem_detail"),
]
