"""50 submissions posted at once through the API by 10 clients: each stored exactly once, and
each evaluated exactly once.

Slow: the requests go to a real server process (daphne, its threads, SQLite's locks between two
processes), which the test client in this process cannot show. The evaluations run in this
process with the stand-in harness, draining the queue the server filled: a real runner's
evaluations are shown by tests/test_two_runners.py and tests/test_submission_flow.py.
"""

import threading
import time
from collections import Counter

import pytest
import requests
from django.contrib.auth import get_user_model
from django.utils.module_loading import import_string

from submissions.models import Evaluation, Submission
from tests.api_support import token_for
from tests.conftest import kernel_source, take_queued_tasks

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CLIENTS = 10
PER_CLIENT = 5


@pytest.mark.timeout(300)
def test_fifty_concurrent_submissions_are_stored_once_and_all_evaluated(
    live_site, relu_problem, cpu_hardware, harness, settings, monkeypatch
):
    User = get_user_model()
    keys = [token_for(User.objects.create_user(f"agent{i}", password="agent-passphrase-9"))
            for i in range(CLIENTS)]
    source = kernel_source("relu_correct.py")

    barrier = threading.Barrier(CLIENTS)
    accepted: dict[str, int] = {}  # idempotency key -> submission id
    failures: list[str] = []
    lock = threading.Lock()

    def client(index: int) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Token {keys[index]}"
        barrier.wait()  # all ten start together
        # Each request is sent twice, as a client does after a lost answer; the key makes the
        # second one return the first one's submission.
        for attempt in range(2):
            for n in range(PER_CLIENT):
                key = f"client{index}-kernel{n}"
                response = session.post(
                    f"{live_site}/api/v1/submissions/",
                    json={"level": 1, "number": 901, "backend": "torch", "hardware": "cpu",
                          "source": source, "filename": f"{key}.py"},
                    headers={"Idempotency-Key": key},
                    timeout=60,
                )
                with lock:
                    if response.status_code != 202:
                        failures.append(f"{key}: {response.status_code} {response.text[:200]}")
                    elif attempt == 0:
                        accepted[key] = response.json()["id"]
                    elif accepted.get(key) != response.json()["id"]:
                        failures.append(f"{key}: the retry made a second submission")

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    posted = time.monotonic() - started
    assert failures == []
    assert len(accepted) == CLIENTS * PER_CLIENT

    # Stored exactly once: 50 rows, one per key, each owned by the client that sent it.
    assert Submission.objects.count() == CLIENTS * PER_CLIENT
    assert set(accepted.values()) == set(Submission.objects.values_list("pk", flat=True))
    for submission in Submission.objects.select_related("user"):
        assert submission.idempotency_key.startswith(f"client{submission.user.username[5:]}-")

    # A runner's worker: every task the server queued, in order. Each submission was queued
    # once (the retries queue nothing), so each is evaluated once.
    settings.REVERIFY_NEW_RECORDS = False  # as the runners of the other tests have it
    monkeypatch.setenv("KBSITE_RUNNER_NAME", "worker:1")
    tasks = list(take_queued_tasks("cpu"))
    assert sorted(task["args"][0] for task in tasks) == sorted(accepted.values())
    for task in tasks:
        harness.will_return(ms=1.0)
        assert import_string(task["func"])(*task["args"]) == "correct"
    evaluated = time.monotonic() - started
    verdicts = Counter(Submission.objects.values_list("verdict", flat=True))
    assert verdicts == {"correct": CLIENTS * PER_CLIENT}
    # Each evaluated exactly once.
    assert Evaluation.objects.count() == CLIENTS * PER_CLIENT
    assert Evaluation.objects.values("submission").distinct().count() == CLIENTS * PER_CLIENT
    print(f"\n100 POSTs (50 new, 50 retries) in {posted:.1f} s; "
          f"50 evaluations (stand-in harness) finished {evaluated:.1f} s after the first POST")
