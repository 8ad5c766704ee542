"""50 submissions posted at once through the API by 10 clients: each stored exactly once, all
evaluated by a real runner process."""

import threading
import time
from collections import Counter

import pytest
import requests
from django.contrib.auth import get_user_model

from submissions.models import Evaluation, Submission
from tests.api_support import token_for
from tests.conftest import kernel_source, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CLIENTS = 10
PER_CLIENT = 5


@pytest.mark.timeout(900)
def test_fifty_concurrent_submissions_are_stored_once_and_all_evaluated(
    live_site, start_runner, relu_problem, cpu_hardware
):
    User = get_user_model()
    keys = [token_for(User.objects.create_user(f"agent{i}", password="agent-passphrase-9"))
            for i in range(CLIENTS)]
    source = kernel_source("relu_correct.py")
    start_runner(Q_WORKERS="2")

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

    wait_for(
        lambda: Submission.objects.filter(status=Submission.Status.FINISHED).count()
        == CLIENTS * PER_CLIENT,
        timeout=780,
        interval=1,
    )
    evaluated = time.monotonic() - started
    verdicts = Counter(Submission.objects.values_list("verdict", flat=True))
    assert verdicts == {"correct": CLIENTS * PER_CLIENT}
    # Each evaluated exactly once.
    assert Evaluation.objects.count() == CLIENTS * PER_CLIENT
    assert Evaluation.objects.values("submission").distinct().count() == CLIENTS * PER_CLIENT
    print(f"\n100 POSTs (50 new, 50 retries) in {posted:.1f} s; "
          f"50 evaluations finished {evaluated:.1f} s after the first POST")
