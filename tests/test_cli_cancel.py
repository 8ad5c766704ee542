"""`kb cancel ID` and `kb cancel --batch ID` (issue 63), kb running in this process against this
process's site: its HTTP requests go to Django's test client (DjangoTransport), so the command's
own code, the API and the services all run for real, without a server process."""

import pytest
import requests
from django.test import Client

from kbcli import main as kb_main
from kbcli.client import Client as KbClient
from submissions.models import Submission
from tests.api_support import SchemaCheckedClient, token_for
from tests.test_cancel import batch_items, queued


class DjangoTransport(requests.adapters.BaseAdapter):
    """Sends kb's requests to this process's Django (the test client) instead of a socket."""

    def __init__(self) -> None:
        super().__init__()
        self.client = Client()

    def send(self, request, **kwargs):
        url = requests.utils.urlparse(request.url)
        path = url.path + (f"?{url.query}" if url.query else "")
        answer = self.client.generic(
            request.method, path, data=request.body or b"",
            content_type=request.headers.get("Content-Type", "application/json"),
            HTTP_AUTHORIZATION=request.headers.get("Authorization", ""),
        )
        response = requests.Response()
        response.status_code = answer.status_code
        response._content = answer.content
        response.headers.update(dict(answer.items()))
        response.request, response.url = request, request.url
        return response

    def close(self) -> None:
        pass


@pytest.fixture
def kb(user, monkeypatch):
    """`kb` in this process, talking to this process's site through DjangoTransport."""
    client = KbClient("http://testserver", token_for(user), retries=0)
    client.session.mount("http://", DjangoTransport())
    monkeypatch.setattr(kb_main, "client_from_config", lambda: client)
    return kb_main.main


@pytest.mark.django_db
def test_kb_cancel_cancels_a_submission_and_kb_status_says_cancelled(
    kb, user, cpu_hardware, relu_problem, capsys
):
    submission = queued(user, relu_problem, cpu_hardware, test_run=True, timed=False)
    assert kb(["cancel", str(submission.pk)]) == 0
    assert f"Test run {submission.pk}: cancelled" in capsys.readouterr().out
    assert Submission.objects.get(pk=submission.pk).status == "cancelled"
    # Settled: nothing to wait for, and no result, so not a success (tests/test_cli_exit_codes.py).
    assert kb(["status", str(submission.pk), "--wait"]) == 1
    out = capsys.readouterr().out
    assert "status     cancelled" in out and "off board, cancelled" in out
    assert kb(["cancel", str(submission.pk)]) == 1
    assert "already cancelled" in capsys.readouterr().err
    assert kb(["list", "--status", "cancelled"]) == 0
    assert str(submission.pk) in capsys.readouterr().out


@pytest.mark.django_db
def test_kb_cancel_batch_cancels_every_waiting_submission_of_it(
    kb, user, cpu_hardware, relu_problem, capsys
):
    api = SchemaCheckedClient().with_token(token_for(user))
    batch_id = api.post("/api/v1/submissions/batch/", {"submissions": batch_items(2)},
                        format="json").json()["batch"]
    assert kb(["cancel", "--batch", str(batch_id)]) == 0
    assert f"Batch {batch_id}: cancelled (2 cancelled" in capsys.readouterr().out
    assert set(Submission.objects.filter(batch_id=batch_id).values_list(
        "status", flat=True)) == {"cancelled"}
