from django.urls import path

from competitions.consumers import StandingsConsumer
from leaderboard.consumers import BoardConsumer, LeaderboardConsumer
from submissions.consumers import SubmissionConsumer

websocket_urlpatterns = [
    path("ws/submissions/<int:submission_id>/", SubmissionConsumer.as_asgi()),
    path("ws/boards/<int:problem_id>/<slug:hardware>/", BoardConsumer.as_asgi()),
    path("ws/leaderboard/", LeaderboardConsumer.as_asgi()),
    path("ws/competitions/<int:competition_id>/", StandingsConsumer.as_asgi()),
]
