"""ApiToken moved from the submissions app to accounts (accounts 0001, submissions 0012) without
moving a row: a token made before the move still authenticates after it, and its content type
(with the permissions on tokens) went along.

The database is taken back to before the move with Django's MigrationExecutor, a token is made
there through the historical model, and the database is migrated forward again."""

import hashlib

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.cache import cache
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from accounts.models import ApiToken
from accounts.services import api_token_authenticate
from tests.api_support import SchemaCheckedClient

MOVE = ("submissions", "0012_move_apitoken_to_accounts")
KEY = "kb_made-before-the-move"


def _before_the_move(executor: MigrationExecutor) -> tuple[str, str]:
    """The submissions migration that the move follows."""
    parents = executor.loader.graph.node_map[MOVE].parents
    return next(parent.key for parent in parents if parent.key[0] == "submissions")


@pytest.mark.django_db(transaction=True)
@pytest.mark.budget(10)  # reason: loads the migration graph and renders past states twice
def test_a_token_made_before_the_move_still_authenticates_after_it():
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    before = _before_the_move(executor)
    executor.migrate([before, ("accounts", None)])
    try:
        # The models as they were then: the token, its user, and the content types.
        also = [node for node in latest if node[0] in ("auth", "contenttypes")]
        old = executor.loader.project_state([before, *also]).apps
        user = old.get_model("auth", "User").objects.create(username="ada", is_active=True)
        old.get_model("submissions", "ApiToken").objects.create(
            user=user, name="laptop", prefix=KEY[:10],
            key_hash=hashlib.sha256(KEY.encode()).hexdigest(), scopes=["read", "submit"],
        )
        old_types = old.get_model("contenttypes", "ContentType").objects
        type_id = old_types.get(app_label="submissions", model="apitoken").pk
    finally:
        executor = MigrationExecutor(connection)  # a fresh graph: the applied set changed
        executor.migrate(latest)
        ContentType.objects.clear_cache()

    token = api_token_authenticate(key=KEY)
    assert token is not None and token.user.username == "ada" and token.name == "laptop"
    assert ApiToken._meta.db_table == "submissions_apitoken"
    cache.clear()  # the API's throttles count in the cache
    response = SchemaCheckedClient().with_token(KEY).get("/api/v1/submissions/")
    assert response.status_code == 200
    # The content type is the same row, now the accounts app's: permissions on tokens stayed.
    assert ContentType.objects.get_for_model(ApiToken).pk == type_id
    assert Permission.objects.get(codename="view_apitoken").content_type_id == type_id
