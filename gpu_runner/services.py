"""The runner's side of an evaluation: claim, evaluate in a sandboxed child, store, finish, notify.

No database transaction is open while candidate code runs; the only writes during the run are
short progress updates and lease extensions.
"""

import copy
import logging
import secrets
import threading
import time

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from competitions.services import standings_refresh_for
from evaluation import fairness, leases, scoring
from evaluation.models import Runner
from evaluator.config import DEFAULT_N_TRIALS, default_timing
from evaluator.errors import clean_text, truncate
from evaluator.gate import DeviceGate
from evaluator.runner import results, sandbox
from evaluator.types import Job, Result
from gpu_runner.sharing import profile_process_fits, sharing_fields
from kbsite.live import publish, submission_group
from leaderboard.selectors import would_set_record
from leaderboard.services import board_refresh_for
from problems.models import Baseline
from submissions.events import submission_status_publish
from submissions.models import Evaluation, NcuReport, Reverification, Submission
from submissions.queues import REVERIFICATIONS, enqueue_reverification, fair_sources
from submissions.reverifications import ReverificationError, reverification_request
from submissions.runs.samples import run_sample_refresh
from submissions.selectors import submission_status_payload

log = logging.getLogger(__name__)

PROGRESS_SAVE_EVERY = 0.5  # seconds between progress writes, so a fast kernel cannot flood


def evaluate_submission(*, submission_id: int, runner_name: str) -> str:
    """A submission's task: the runner claims the fair next work of the submission's hardware
    (run_next), which need not be this submission; returns what happened."""
    hardware_id = Submission.objects.filter(pk=submission_id).values_list(
        "hardware_id", flat=True).first()
    if hardware_id is None:  # deleted since it was queued: its task still serves the queue
        hardware_id = Runner.objects.filter(name=runner_name).values_list(
            "hardware_id", flat=True).first()
        if hardware_id is None:
            return "gone"
    return run_next(hardware_id=hardware_id, runner_name=runner_name)


def run_next(*, hardware_id: int, runner_name: str) -> str:
    """Claim the fair next submission or re-verification of the hardware (evaluation/fairness.py,
    the one rule) and run it: whichever row a task's message named, the runner takes the row
    the rule puts first, with the lease's conditional update (one winner). Every queued row has
    a task, and each task claims at most one row, so none is lost and none runs twice; a task
    that finds nothing to claim (a redelivered one) returns "not claimed"."""
    handed_back = []

    def claim(source, waiting):
        model = source.rows.model
        row = model.objects.filter(pk=waiting.pk).first()
        if row is None:
            return None
        won = row.claim(runner_name=runner_name, lease_seconds=settings.RUNNER_LEASE_SECONDS)
        return row if won else None

    def refused(source, row) -> None:  # a re-verification this runner must leave to another
        if row.hand_back(runner_name=runner_name):
            handed_back.append(row.pk)

    claimed = fairness.claim_next(
        fair_sources(hardware_id), runner_name=runner_name, claim=claim, refused=refused
    )
    if claimed is None:
        return "left for another runner" if handed_back else "not claimed"
    source, row = claimed
    if source == REVERIFICATIONS:
        return _reverify_claimed(row, runner_name=runner_name)
    return _evaluate_claimed(row, runner_name=runner_name)


def _evaluate_claimed(submission: Submission, *, runner_name: str) -> str:
    """Evaluate a submission this runner has claimed."""
    submission = Submission.objects.select_related(
        "problem", "problem_version", "hardware").get(pk=submission.pk)
    Runner.objects.filter(name=runner_name).update(current_submission_id=submission.pk)
    submission_status_publish(submission=submission)
    try:
        if _cancelled(submission):  # between the claim and now: nothing to start
            return "cancelled"
        result = _run_in_sandbox(submission, runner_name=runner_name)
        if _cancelled(submission):
            # Stopped by the heartbeat (or it ended as the cancel came): the row says
            # cancelled, and whatever the killed evaluation returned is no verdict of its own.
            log.info("submission %s was cancelled while running; no result stored",
                     submission.pk)
            return "cancelled"
        evaluation = _store_result(submission, result, runner_name=runner_name)
    finally:
        Runner.objects.filter(name=runner_name).update(current_submission_id=None)
    return evaluation.verdict if evaluation else "already stored"


def _cancelled(submission: Submission) -> bool:
    return Submission.objects.filter(
        pk=submission.pk, status=Submission.Status.CANCELLED).exists()


def _stop_if_cancelled(submission: Submission, stop: threading.Event):
    """The lease's on_lost for a running submission: a beat that finds the lease gone because
    the submission was cancelled asks its evaluation to stop (sandbox.run_job's `stop`: its
    process tree killed within a second, its device admission released); one taken over by
    another runner is left to finish, its result dropped as before."""

    def on_lost(row) -> None:
        if _cancelled(submission):
            log.info("submission %s was cancelled: stopping its evaluation", submission.pk)
            stop.set()

    return on_lost


def submission_stop(submission: Submission, *, message: str) -> bool:
    """Finish a submission whose runners all died evaluating it (leases.stop_if_poison): a
    runner_crash evaluation saying `message`, and no further claim."""
    with transaction.atomic():
        stopped = leases.stop(
            submission,
            status=Submission.Status.FINISHED,
            verdict=Evaluation.Verdict.RUNNER_CRASH,
            finished_at=timezone.now(),
        )
        if not stopped:
            return False
        Evaluation.objects.get_or_create(
            submission=submission,
            purpose=Evaluation.Purpose.SUBMISSION,
            attempt=submission.attempts,
            defaults={
                "hardware_id": submission.hardware_id,
                "problem_version_id": submission.problem_version_id,
                "verdict": Evaluation.Verdict.RUNNER_CRASH,
                "error": message,
                "source_hash": submission.source_hash,
            },
        )
        submission_status_publish(submission=submission)
    return True


def _fresh_seed(avoid: set[int]) -> int:
    seed = secrets.randbits(62)
    while seed in avoid:  # a re-verification never replays a seed the submission has seen
        seed = secrets.randbits(62)
    return seed


def _timing_cap(device: str) -> dict:
    """EVALUATION_MAX_REPS, where it lowers the judge's own cap of timed calls per side."""
    cap = settings.EVALUATION_MAX_REPS
    if cap and cap < default_timing(device)["max_reps"]:
        return {"timing": {"max_reps": cap}}
    return {}


def build_job(submission: Submission, *, avoid_seeds: set[int] = frozenset()) -> Job:
    problem = submission.problem
    hardware = submission.hardware
    device = "cpu" if hardware.kind == hardware.Kind.CPU else "cuda"
    # What the runner's evaluations usually have; this one, where its problem leaves room.
    usual_profile_process = device != "cpu" and settings.RUNNER_PROFILE_PROCESS
    profile_process = (usual_profile_process
                       and profile_process_fits(submission.problem_version, hardware))
    return {
        "mode": "evaluate",
        "reference_source": submission.problem_version.source,
        "candidate_source": submission.source,
        "backend": submission.backend,
        "precision": submission.precision,
        "atol": problem.atol,
        "rtol": problem.rtol,
        "device": device,
        # Chosen here, per evaluation, and shown to the submitter only afterwards.
        "seed": _fresh_seed(set(avoid_seeds)),
        "n_trials": DEFAULT_N_TRIALS,
        # A test run without timing: the correctness trials only (the judge times nothing).
        "measure": submission.timed,
        "build_dir": str(settings.BUILD_CACHE_DIR),
        # Builds are cached per owner and source: a kernel can only ever spoil its own owner's.
        "build_owner": submission.participant,
        # The hardware's speed of light: results faster than it are flagged, never ranked.
        "peak_bandwidth_gbs": hardware.peak_bandwidth_gbs,
        "peak_tflops": hardware.peak_tflops or {},
        "time_limit_s": settings.EVALUATION_TIME_LIMIT,
        **_timing_cap(device),
        "profile_process": profile_process,
        # The spare judge started beside it is ready for the job the fair rule takes next.
        **_spare_for(hardware, usual_profile_process=usual_profile_process),
        **sharing_fields(hardware, submission.problem_version, profile_process=profile_process),
    }


def _spare_for(hardware, *, usual_profile_process: bool) -> dict:
    """What the spare judge started beside an evaluation is prepared for (pool.spare_job): the
    row the fair rule (evaluation/fairness.py) puts first on this hardware now, its backend and
    whether its problem leaves room for a profiling process; with nothing waiting, the usual
    job (a profiling process where the runner has them). The order may change before the next
    claim; a spare that does not fit the job it then gets is not used (pool.spec_keys)."""
    spare = {"spare_profile_process": usual_profile_process}
    sources = fair_sources(hardware.pk)
    upcoming = next(fairness.ordered(sources), None)
    if upcoming is None:
        return spare
    row = sources[upcoming.source].rows.filter(pk=upcoming.pk).first()
    submission = getattr(row, "submission", row)  # a re-verification evaluates its submission
    if isinstance(submission, Submission):
        spare["spare_backend"] = submission.backend
        spare["spare_profile_process"] = usual_profile_process and profile_process_fits(
            submission.problem_version, hardware)
    return spare


def _run_in_sandbox(submission: Submission, *, runner_name: str) -> dict:
    last_saved = 0.0

    def on_event(event: dict) -> None:
        nonlocal last_saved
        now = time.monotonic()
        if event.get("type") == "phase" or now - last_saved >= PROGRESS_SAVE_EVERY:
            last_saved = now
            # Running only: a cancelled row keeps saying so until its evaluation is killed.
            Submission.objects.filter(
                pk=submission.pk, status=Submission.Status.RUNNING).update(progress=event)
            submission.progress = event
            payload = submission_status_payload(submission)
            publish(submission_group(submission.pk), {"type": "progress", **payload})

    job = build_job(submission)
    stop = threading.Event()
    return _run_job(job, lease=submission, runner_name=runner_name, on_event=on_event,
                    on_lost=_stop_if_cancelled(submission, stop), stop=stop)


def _run_job(
    job: Job, *, lease: Submission | Reverification, runner_name: str, on_event=None,
    on_lost=None, stop: threading.Event | None = None,
) -> Result:
    started = time.monotonic()
    try:
        with leases.kept(
            [lease], runner_name=runner_name, lease_seconds=settings.RUNNER_LEASE_SECONDS,
            on_lost=on_lost,
        ):
            result = sandbox.run_job(job, on_event=on_event, stop=stop)
    except Exception as error:  # the harness itself failed: say so, never lose the submission
        log.exception("harness failed on %s", lease)
        result = {"verdict": "harness_error", "correct": False, "error": str(error)}
    result.setdefault("seeds", {"seed": job["seed"]})
    result.setdefault("phases", {})["wall"] = time.monotonic() - started
    return result


def _stored_text(value) -> str:
    """Text from the child, stored safely: terminal escapes stripped, cut with a marker."""
    if isinstance(value, dict):  # {"stdout": ..., "stderr": ...}
        value = "\n".join(f"--- {name} ---\n{text}" for name, text in value.items() if text)
    return truncate(clean_text(str(value or "")), settings.LOG_DISPLAY_MAX_CHARS)


def _stored_json(value, default=None):
    """A JSON field from the child, stored within results.RESULT_FIELD_MAX_BYTES (cut with a
    marker): the worker's replies reach these fields, and a row is served whole."""
    if value is None or value == {} or value == []:
        return default
    return results.cap_field(results.json_safe(value))


def _baseline_speedup(submission: Submission, mode: str, candidate_ms: float | None):
    if not candidate_ms:
        return None
    baseline = Baseline.objects.filter(
        problem_id=submission.problem_id, hardware_id=submission.hardware_id, mode=mode
    ).first()
    return baseline.median_ms / candidate_ms if baseline else None


def _evaluation_fields(submission: Submission, result: Result, *, runner_name: str) -> dict:
    """An Evaluation's fields from what the harness returned."""
    candidate = result.get("candidate") or {}
    reference = result.get("reference") or {}
    candidate_ms = candidate.get("median_ms")
    verdict = result.get("verdict") or Evaluation.Verdict.HARNESS_ERROR
    return {
        "submission": submission,
        "hardware_id": submission.hardware_id,
        "problem_version_id": submission.problem_version_id,
        "runner_name": runner_name,
        "verdict": verdict,
        "correct": bool(result.get("correct")) and verdict == Evaluation.Verdict.CORRECT,
        "error": _stored_text(result.get("error")),
        "traceback": _stored_text(result.get("traceback")),
        "compile_log": _stored_text(result.get("compile_log")),
        "logs": _stored_text(result.get("logs")),
        "trials": _stored_json(result.get("trials"), []),
        "candidate_stats": _stored_json(candidate),
        "reference_stats": _stored_json(reference),
        "candidate_median_ms": candidate_ms,
        "reference_median_ms": reference.get("median_ms"),
        "speedup": result.get("speedup"),
        "speedup_eager": _baseline_speedup(submission, Baseline.Mode.EAGER, candidate_ms),
        "speedup_compile": _baseline_speedup(submission, Baseline.Mode.COMPILE, candidate_ms),
        "flags": list(result.get("flags") or []),
        # The evidence behind each flag is kept beside the static report.
        "static_report": _stored_json({
            **(result.get("static_report") or {}),
            "checks": result.get("checks") or {},
            # How the timing went (samples, spread, flushes) and when (its window, and when
            # each phase began): what tells a disturbed timing from a slow kernel.
            "timing": {**(result.get("timing_detail") or {}),
                       "window": result.get("timing_window")},
            "phase_log": result.get("phase_log") or [],
        }, {}),
        "environment": _stored_json(result.get("environment"), {}),
        "seeds": _stored_json(result.get("seeds"), {}),
        "phases": _stored_json(result.get("phases"), {}),
        "profile": _stored_json(result.get("profile"), {}),
        "source_hash": submission.source_hash,
        "evaluator_version": result.get("evaluator_version") or "",
    }


def _store_result(submission: Submission, result: Result, *, runner_name: str) -> Evaluation | None:
    fields = _evaluation_fields(submission, result, runner_name=runner_name)
    verdict = fields["verdict"]
    try:
        with transaction.atomic():
            evaluation = Evaluation.objects.create(
                **fields, attempt=submission.attempts, started_at=submission.started_at
            )
            finished = leases.finish(
                submission,
                runner_name=runner_name,
                status=Submission.Status.FINISHED,
                verdict=verdict,
                finished_at=timezone.now(),
                progress={"phase": "done"},
            )
            if not finished:
                # Our claim was taken over (we were presumed dead); the other result stands.
                raise IntegrityError("claim lost")
            Runner.objects.filter(name=runner_name).update(
                evaluations_done=F("evaluations_done") + 1
            )
            submission.refresh_from_db()
            if not submission.test_run:  # a test run never reaches a board
                _hold_new_record(evaluation)
                _refresh_boards(evaluation)
            submission_status_publish(submission=submission)
    except IntegrityError:
        log.warning("submission %s was finished elsewhere; result dropped", submission.pk)
        return None
    return evaluation


def _hold_new_record(evaluation: Evaluation) -> None:
    """A result that would set a new record ranks only once a re-verification confirms it.

    So is one whose timing a holding note set aside (the judge's clock did not confirm it on a
    loaded host) where it would set a record with that timing: rather than staying off the
    board until its owner asks, it is evaluated again at once, its own timing set aside, and
    ranks on what its later evaluations find (_store_reverification)."""
    if not settings.REVERIFY_NEW_RECORDS:
        return
    candidate = evaluation
    if evaluation.timing_held:
        candidate = copy.copy(evaluation)
        candidate.flags = [f for f in evaluation.flags if Reverification.vouched([f])]
    if not would_set_record(candidate):
        return
    try:
        reverification_request(
            submission=evaluation.submission, reason=Reverification.Reason.NEW_RECORD
        )
    except ReverificationError as error:  # one is already open: it decides
        log.info("%s", error.message)


# ---- re-verification ----------------------------------------------------------------------------


def reverify_submission(*, reverification_id: int, runner_name: str) -> str:
    """A re-verification's task: like a submission's, it claims the fair next work of its
    hardware (run_next); a runner that may not run this one leaves it for another."""
    open_rows = Reverification.objects.exclude(status__in=Reverification.FINISHED)
    hardware_id = open_rows.filter(pk=reverification_id).values_list(
        "submission__hardware_id", flat=True).first()
    if hardware_id is None:
        return "gone"
    return run_next(hardware_id=hardware_id, runner_name=runner_name)


def _reverify_claimed(reverification: Reverification, *, runner_name: str) -> str:
    """Run a re-verification this runner has claimed."""
    reverification = Reverification.objects.select_related(
        "submission__problem", "submission__problem_version", "submission__hardware",
        "checked_evaluation",
    ).get(pk=reverification.pk)
    submission = reverification.submission
    Runner.objects.filter(name=runner_name).update(current_submission_id=submission.pk)
    try:
        job = build_job(submission, avoid_seeds=_seeds_used(submission))
        result = _run_job(job, lease=reverification, runner_name=runner_name)
        evaluation = _store_reverification(reverification, result, runner_name=runner_name)
    finally:
        Runner.objects.filter(name=runner_name).update(current_submission_id=None)
    if evaluation is None:
        return "already stored"
    if reverification.status == Reverification.Status.QUEUED:
        return "undecided: a third evaluation is queued"
    return reverification.status


def _seeds_used(submission: Submission) -> set[int]:
    """The server seeds of the submission's earlier evaluations (and of the runs an evaluation
    made before it ran again alone, sandbox._run_again_alone)."""
    used = set()
    for seeds in submission.evaluations.values_list("seeds", flat=True):
        seed = (seeds or {}).get("server", (seeds or {}).get("seed"))
        if seed is not None:
            used.add(seed)
        used.update(s for s in (seeds or {}).get("earlier_runs") or [] if isinstance(s, int))
    return used


def _store_reverification(
    reverification: Reverification, result: dict, *, runner_name: str
) -> Evaluation | None:
    """Store a re-verification's evaluation and let the one rule decide (Reverification.
    compare_timing, evaluation/stats.settle): the second agreeing with the first, or a third with
    either, passes and ranks on the slower of the two that agree (that timing is copied onto the
    stored evaluation, its own kept beside it); the second disagreeing queues a third; a third
    agreeing with neither gets the note timing_not_reproduced (a note, never an exploit) and
    ranks on the slowest of the three: the second and third decide how fast, not whether."""
    submission = reverification.submission
    fields = _evaluation_fields(submission, result, runner_name=runner_name)
    comparison = None
    # Judged when this evaluation is correct, unflagged and timed (notes such as a small
    # own-kernel share do not stop it; exploits do: evaluation/scoring.py). Only timings the
    # judge vouched for count: one a holding note set aside (timing_unconfirmed) is compared
    # with nothing, and a second one so set aside calls a third like a disagreement.
    if scoring.honest_and_timed(fields) and reverification.checked_evaluation is not None:
        role = "third" if reverification.is_third_round else "second"
        earlier = [("first", reverification.checked_evaluation),
                   ("second", reverification.disputed_evaluation)]
        timings = [(name, Reverification.timing_of(e)) for name, e in earlier
                   if e is not None and Reverification.vouched(e.flags)]
        set_aside = [name for name, e in earlier
                     if e is not None and not Reverification.vouched(e.flags)]
        if Reverification.vouched(fields["flags"]):
            timings.append((role, fields))
        else:
            set_aside.append(role)
        comparison = Reverification.compare_timing(
            timings, last=reverification.is_third_round, set_aside=tuple(set_aside)
        )
    if comparison is not None:
        ranked_on = comparison["ranked_on"]
        if ranked_on is not None and ranked_on != role:
            comparison[f"{role}_timing"] = {
                name: fields[name] for name in Reverification.TIMING_FIELDS
            }
            fields.update(dict(timings)[ranked_on])
        fields["static_report"]["checks"]["reverification"] = comparison
        if comparison["note"] and Reverification.TIMING_NOTE not in fields["flags"]:
            fields["flags"].append(Reverification.TIMING_NOTE)
    third_needed = comparison is not None and comparison["outcome"] == "third"
    try:
        with transaction.atomic():
            evaluation = Evaluation.objects.create(
                **fields,
                purpose=Evaluation.Purpose.REVERIFY,
                attempt=_next_reverify_attempt(submission),
                started_at=reverification.started_at,
            )
            if third_needed:
                closed = reverification.dispute(evaluation=evaluation, runner_name=runner_name)
            else:
                closed = reverification.finish(evaluation=evaluation, runner_name=runner_name)
            if not closed:
                raise IntegrityError("claim lost")
            if third_needed:
                transaction.on_commit(
                    lambda: enqueue_reverification(reverification), robust=True
                )
            Runner.objects.filter(name=runner_name).update(
                evaluations_done=F("evaluations_done") + 1
            )
            _refresh_boards(evaluation)
            submission.refresh_from_db()
            submission_status_publish(submission=submission)
    except IntegrityError:
        log.warning("%s was finished elsewhere; result dropped", reverification)
        return None
    return evaluation


def _next_reverify_attempt(submission: Submission) -> int:
    done = Evaluation.objects.filter(submission=submission, purpose=Evaluation.Purpose.REVERIFY)
    return done.count() + 1


def reverification_stop(reverification: Reverification, *, message: str) -> bool:
    """Fail a re-verification whose runners all died running it (leases.stop_if_poison), with a
    runner_crash evaluation saying `message`; the submission's boards follow."""
    submission = reverification.submission
    with transaction.atomic():
        evaluation = Evaluation.objects.create(
            submission=submission,
            purpose=Evaluation.Purpose.REVERIFY,
            attempt=_next_reverify_attempt(submission),
            hardware_id=submission.hardware_id,
            problem_version_id=submission.problem_version_id,
            verdict=Evaluation.Verdict.RUNNER_CRASH,
            error=message,
            source_hash=submission.source_hash,
        )
        if not reverification.stop(evaluation=evaluation):
            transaction.set_rollback(True)
            return False
        _refresh_boards(evaluation)
        submission.refresh_from_db()
        submission_status_publish(submission=submission)
    return True


def _refresh_boards(evaluation: Evaluation) -> None:
    """Boards, standings and a run's samples are derived data: a failure there must never cost
    the evaluation itself."""
    try:
        with transaction.atomic():  # a savepoint, so a failed refresh leaves the rest intact
            board_refresh_for(evaluation)
            standings_refresh_for(evaluation)
            run_sample_refresh(submission=evaluation.submission)
    except Exception:
        log.exception("could not refresh the boards for evaluation %s", evaluation.pk)


def ncu_report_make(*, report_id: int, runner_name: str) -> str:
    """Make one Nsight Compute report if this runner wins the claim (ncu.py runs it in the
    candidate's sandbox, never inside a timed evaluation); returns its status."""
    from evaluator.runner import ncu

    report = (
        NcuReport.objects.select_related("submission__problem", "submission__problem_version",
                                         "submission__hardware")
        .filter(pk=report_id)
        .first()
    )
    if report is None:
        return "gone"
    if not report.claim(runner_name=runner_name, lease_seconds=settings.RUNNER_LEASE_SECONDS):
        return "not claimed"
    job = build_job(report.submission)
    try:
        with leases.kept([report], runner_name=runner_name,
                         lease_seconds=settings.RUNNER_LEASE_SECONDS):
            # ncu replays each kernel many times: the device is this report's alone meanwhile.
            gate = DeviceGate(job.get("gate_dir"))
            try:
                with gate.exclusive():
                    outcome = ncu.run_report(job, timeout_s=settings.EVALUATION_TIME_LIMIT)
            finally:
                gate.close()
    except Exception as error:  # the harness itself failed: say so, keep serving
        log.exception("ncu report %s failed", report.pk)
        outcome = {"status": "failed", "message": f"the runner failed to make it: {error}"}
    status = outcome.get("status") or NcuReport.Status.FAILED
    report.finish(
        runner_name=runner_name,
        status=status,
        message=_stored_text(outcome.get("message") or "")[:4000],
        text=_stored_text(outcome.get("text") or ""),
        kernels=outcome.get("kernels") or [],
        report=outcome.get("report"),
        report_size=len(outcome.get("report") or b""),
        ncu_version=str(outcome.get("ncu_version") or "")[:100],
        seconds=outcome.get("seconds"),
    )
    submission_status_publish(submission=report.submission)
    return status
