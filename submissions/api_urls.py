"""REST API routes (/api/...)."""

urlpatterns: list = []
