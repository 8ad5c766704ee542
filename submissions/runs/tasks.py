"""django-q2 tasks of model runs, on the "generation" cluster: load the row, call a service.

Serve them with `Q_CLUSTER_NAME=generation Q_WORKERS=<n> python manage.py qcluster`; the number
of workers is the run's concurrency limit (how many model calls are in flight at once).
"""

from submissions.runs.services import generation_step, run_watch


def generate(generation_id: int, attempts: int) -> str:
    return generation_step(generation_id=generation_id, attempts=attempts)


def watch(run_id: int) -> str:
    return run_watch(run_id=run_id)
