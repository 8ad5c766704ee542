from django.apps import AppConfig


class CompetitionsConfig(AppConfig):
    name = "competitions"
    default_auto_field = "django.db.models.BigAutoField"
