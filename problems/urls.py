from django.urls import path

from problems import views

urlpatterns = [
    path("", views.problem_list, name="problem_list"),
    # By slug, /problems/level1/19_ReLU/ (what links use), or /problems/level1/19/.
    path("level<int:level>/<str:name>/", views.problem_detail, name="problem_detail"),
    # By level and number, the older form, which links made before slugs still use.
    path("<int:level>/<int:number>/", views.problem_detail, name="problem_detail_number"),
]
