import gc
import os

from django.core.asgi import get_asgi_application
from django.core.exceptions import ImproperlyConfigured

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kbsite.settings")
django_asgi_app = get_asgi_application()

from django.conf import settings  # noqa: E402

# The web server refuses to start without a key (sessions, CSRF and signed tasks need one);
# settings leave it empty with DEBUG off when neither the environment nor var/ has one.
try:
    settings.SECRET_KEY  # noqa: B018  (Django refuses an empty one here)
except ImproperlyConfigured:
    raise ImproperlyConfigured(
        "SECRET_KEY must be set in the environment when DEBUG is off "
        "(`make run` generates one in var/secret-key)"
    ) from None

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from kbsite.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)

# Everything built so far (Django's apps, models and URL patterns, the channels app) lives as
# long as the process. Frozen out of the collector's reach, it is no longer walked by each full
# collection, which otherwise stalls whichever request it falls in: with the pages of
# bench/leaderboard_bench.py, a full collection took up to 60 ms, 25 ms frozen, and the people
# table's p95 went from 74 to 46 ms. Collected first, so that no garbage is frozen with it.
gc.collect()
gc.freeze()
