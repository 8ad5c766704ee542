"""Schemathesis against the OpenAPI schema at /api/schema/: generated valid and invalid requests
to every operation, through the ASGI app, with a token that may read and submit. No answer may
be a server error, nor have a status, content type or body that the schema does not document;
invalid requests must be refused.

Refusing invalid requests (negative_data_rejection) is checked on the endpoints of this app's
own API (problems, hardware, submissions, quota); the run and leaderboard endpoints get the
other checks. Bounded (a few examples per operation and mode) so that the run takes well under
two minutes.
"""

import pytest
import schemathesis
from django.core.cache import cache
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from kbsite.asgi import application
from submissions.services import submission_create
from tests.api_support import token_for
from tests.conftest import kernel_source

EXAMPLES_PER_OPERATION = 12
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
STRICT_PATHS = ("/api/v1/problems/", "/api/v1/hardware/", "/api/v1/submissions/",
                "/api/v1/quota/")
CONFIG = schemathesis.Config.from_dict(
    {
        "phases": {"stateful": {"enabled": False}},
        "generation": {"max-examples": EXAMPLES_PER_OPERATION},
    }
)


# Loaded once, as the running app serves it (pytest-django has set Django up by now).
schema = schemathesis.openapi.from_asgi("/api/schema/?format=json", application, config=CONFIG)


@pytest.fixture
def auth_headers(transactional_db, settings, user, cpu_hardware, relu_problem) -> dict[str, str]:
    """A token that may read and submit, and data for the operations to find."""
    # Deep requests rather than throttled ones: the throttles have their own tests.
    settings.API_THROTTLE_RATES = {"api_read": "100000/min", "api_submit": "100000/min"}
    cache.clear()
    submission_create(
        user=user, problem=relu_problem, source=kernel_source("relu_correct.py"),
        backend="torch", hardware=cpu_hardware,
    )
    return {"Authorization": f"Token {token_for(user)}"}


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_generated_request_gets_a_server_error_or_an_answer_outside_the_schema(
    case, auth_headers
):
    strict = case.operation.path.startswith(STRICT_PATHS)
    checks = [*CHECKS, negative_data_rejection] if strict else CHECKS
    case.call_and_validate(headers=auth_headers, checks=checks)
