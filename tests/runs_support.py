"""Shared by the run tests: a registered model, canned answers, the generation queue."""

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.utils import timezone
from django_q.models import OrmQ

from submissions.models import Evaluation, Submission
from submissions.runs.llm import MOCK_FILE_ENV
from submissions.runs.models import Model
from submissions.runs.samples import run_sample_refresh
from tests.conftest import REPO, process_env, stop_processes

MODEL_NAME = "openai/gpt-4o-mini"  # in litellm's local price list, so costs are not zero


def fenced(code: str) -> str:
    return f"Here is my kernel.\n\n```python\n{code.strip()}\n```\n"


RELU_CORRECT = fenced("""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0.0)
""")

RELU_WRONG = fenced("""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.where(x > 0, x, 0.01 * x)
""")

ADD_CORRECT = fenced("""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.add(a, b)
""")

SOFTMAX_WRONG = fenced("""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.exp(x)
""")

NO_CODE = "I would rather not write a kernel for a matrix product; PyTorch's is hard to beat."

GELU_RUNTIME_ERROR = fenced("""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        raise RuntimeError("kernel launch failed: invalid configuration argument")
""")


def write_answers(path: Path, answers: dict) -> Path:
    path.write_text(json.dumps(answers), encoding="utf-8")
    return path


def finish_evaluation(
    submission: Submission, *, verdict: str, error: str = "", speedup: float = 0.5
) -> None:
    """Store what a runner would, for tests of what follows an evaluation (the flow tests have
    real runners do it)."""
    Evaluation.objects.create(
        submission=submission, hardware=submission.hardware,
        problem_version=submission.problem_version, verdict=verdict,
        correct=verdict == "correct", error=error, candidate_median_ms=2.0,
        reference_median_ms=2.0 * speedup, speedup=speedup, source_hash=submission.source_hash,
        finished_at=timezone.now(),
    )
    submission.mark_finished(verdict=verdict)
    run_sample_refresh(submission=submission)  # as the runner does once it stores a result


def queued_tasks(queue: str) -> list[dict]:
    """Tasks waiting on a django-q2 queue (ORM broker), as django-q2 packs them."""
    return [row.task for row in OrmQ.objects.filter(key=queue).order_by("id")]


@pytest.fixture
def llm_model(db) -> Model:
    return Model.objects.create(litellm_name=MODEL_NAME, display_name="GPT-4o mini")


@pytest.fixture
def start_generation_cluster(tmp_path) -> Iterator[Callable[..., subprocess.Popen]]:
    """A real `manage.py qcluster` serving the "generation" queue on the test database."""
    started: list[subprocess.Popen] = []

    def start(*, answers: Path, workers: int = 2, **env: str) -> subprocess.Popen:
        log = open(tmp_path / f"generation-{len(started)}.log", "w")  # noqa: SIM115 (the child writes it)
        process = subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=REPO,
            env=process_env(
                Q_CLUSTER_NAME="generation",
                Q_WORKERS=str(workers),
                LITELLM_LOCAL_MODEL_COST_MAP="True",
                **{MOCK_FILE_ENV: str(answers)},
                **env,
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        started.append(process)
        return process

    yield start
    stop_processes(started)
