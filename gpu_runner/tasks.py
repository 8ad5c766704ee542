"""django-q2 tasks: load the row, call a service."""

import os
import socket

from gpu_runner.services import evaluate_submission, ncu_report_make, reverify_submission


def runner_name() -> str:
    return os.environ.get("KBSITE_RUNNER_NAME") or f"{socket.gethostname()}:{os.getpid()}"


def evaluate(submission_id: int) -> str:
    return evaluate_submission(submission_id=submission_id, runner_name=runner_name())


def validate(validation_id: int) -> str:
    from gpu_runner.curation import validate_problem

    return validate_problem(validation_id=validation_id, runner_name=runner_name())


def reverify(reverification_id: int) -> str:
    return reverify_submission(reverification_id=reverification_id, runner_name=runner_name())


def ncu_report(report_id: int) -> str:
    return ncu_report_make(report_id=report_id, runner_name=runner_name())
