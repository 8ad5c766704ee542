"""A runner's jobs on a GPU name the device's gate, the memory they are expected to need (from
the problem's validated peak) and the device's, so that several evaluations share it; CPU jobs,
and GPUs set to one evaluation at a time, name none."""

import pytest

from evaluation.models import Hardware
from evaluator.config import DEFAULT_TIMING, normalize_job
from gpu_runner.curation import baseline_job, validation_job
from gpu_runner.management.commands.runner import worker_env
from gpu_runner.services import build_job
from gpu_runner.sharing import (
    BUILD_NEED_BYTES,
    EVALUATION_OVERHEAD_BYTES,
    PROFILE_PROCESS_OVERHEAD_BYTES,
    UNKNOWN_PEAK_BYTES,
)
from problems.models import Validation
from submissions.services import submission_create
from tests.conftest import kernel_source

GIB = 1 << 30


@pytest.fixture
def h200(db):
    return Hardware.objects.create(slug="h200", name="NVIDIA H200", kind=Hardware.Kind.GPU,
                                   memory_bytes=140 * GIB, gpu_count=1,
                                   backends=["torch", "triton", "cuda"])


def _submission(user, problem, hardware):
    return submission_create(user=user, problem=problem, source=kernel_source("relu_correct.py"),
                             backend="torch", hardware=hardware)


def _validated(problem, hardware, peak: int) -> Validation:
    validation = Validation.objects.create(problem_version=problem.current_version,
                                           hardware=hardware)
    validation.claim(runner_name="test-runner", lease_seconds=60)
    validation.finish(runner_name="test-runner", findings=[], reference_ms=0.5,
                      peak_memory_bytes=peak)
    return validation


def test_a_gpu_job_names_its_devices_gate_and_three_times_the_validated_peak(
        user, relu_problem, h200, settings, monkeypatch, tmp_path):
    settings.RUNNER_EVALUATIONS_PER_GPU = 4
    settings.RUNNER_GATE_DIR = tmp_path / "gates"
    settings.RUNNER_PROFILE_PROCESS = False  # its share: the test below
    monkeypatch.setenv("KBSITE_DEVICE_INDEX", "3")
    submission = _submission(user, relu_problem, h200)
    before = build_job(submission)
    assert before["memory_need_bytes"] == EVALUATION_OVERHEAD_BYTES + 3 * UNKNOWN_PEAK_BYTES

    validation = _validated(relu_problem, h200, 2 * GIB)
    job = build_job(submission)
    assert job["gate_dir"] == str(tmp_path / "gates" / "h200-gpu3")
    assert job["memory_need_bytes"] == EVALUATION_OVERHEAD_BYTES + 6 * GIB
    assert job["device_memory_bytes"] == int(0.9 * 140 * GIB)
    assert job["device_slots"] == settings.RUNNER_EVALUATIONS_PER_GPU  # bounds a run alone's wait
    # A cold build ahead of it is admitted for its processes alone (evaluator/runner/sandbox.py).
    assert job["build_need_bytes"] == BUILD_NEED_BYTES < job["memory_need_bytes"]
    # Validations and baselines of the device take the same gate (they time alone).
    assert validation_job(validation, seed=1)["gate_dir"] == job["gate_dir"]
    assert baseline_job(relu_problem, h200, modes=["eager"], time_limit_s=60)["gate_dir"] == (
        job["gate_dir"])


def test_a_profiling_process_beside_the_trials_counts_one_more_peak_and_its_context(
        user, relu_problem, h200, settings, tmp_path):
    """It draws its own set and holds the candidate's and the reference's outputs while the
    correctness trials run: at three peaks each, two 19_ReLU evaluations and their profiling
    workers were admitted together although they needed more than an H200 has."""
    settings.RUNNER_EVALUATIONS_PER_GPU = 4
    settings.RUNNER_GATE_DIR = tmp_path / "gates"
    settings.RUNNER_PROFILE_PROCESS = True
    submission = _submission(user, relu_problem, h200)
    _validated(relu_problem, h200, 18 * GIB)
    job = build_job(submission)
    assert job["profile_process"] is True
    assert job["memory_need_bytes"] == (EVALUATION_OVERHEAD_BYTES + PROFILE_PROCESS_OVERHEAD_BYTES
                                        + 4 * 18 * GIB)
    # Two such evaluations no longer fit beside each other on an H200.
    assert 2 * job["memory_need_bytes"] > job["device_memory_bytes"]


def test_a_problem_whose_profiling_copy_would_not_fit_beside_it_is_profiled_by_its_worker(
        user, relu_problem, settings, tmp_path):
    """With 6 GiB tensors (an 18 GiB peak) on an 80 GB card, the judge, the worker and a
    profiling process expect more than the card admits: run so on an H100, honest kernels
    evaluated with no other evaluation beside ran out of memory. Without the profiling
    process (the timed worker makes the profiled call after the timing) they fit, and the
    evaluation may share the card with small ones."""
    settings.RUNNER_GATE_DIR = tmp_path / "gates"
    settings.RUNNER_PROFILE_PROCESS = True
    h100 = Hardware.objects.create(slug="h100", name="NVIDIA H100", kind=Hardware.Kind.GPU,
                                   memory_bytes=80 * GIB, gpu_count=1, backends=["torch"])
    _validated(relu_problem, h100, 18 * GIB)
    jobs = {}
    for slots in (4, 1):  # a device not shared holds the same three processes
        settings.RUNNER_EVALUATIONS_PER_GPU = slots
        jobs[slots] = build_job(_submission(user, relu_problem, h100))
        assert jobs[slots]["profile_process"] is False
    job = jobs[4]
    assert job["memory_need_bytes"] == EVALUATION_OVERHEAD_BYTES + 3 * 18 * GIB
    assert job["memory_need_bytes"] < job["device_memory_bytes"]


def test_cpu_jobs_and_a_gpu_set_to_one_evaluation_at_a_time_share_nothing(
        user, relu_problem, cpu_hardware, h200, settings):
    settings.RUNNER_EVALUATIONS_PER_GPU = 4
    cpu_job = normalize_job(build_job(_submission(user, relu_problem, cpu_hardware)))
    assert cpu_job["gate_dir"] is None and cpu_job["memory_need_bytes"] == 0
    settings.RUNNER_EVALUATIONS_PER_GPU = 1
    assert "gate_dir" not in build_job(_submission(user, relu_problem, h200))


def test_a_runner_set_to_fewer_timed_calls_caps_them_and_unset_leaves_the_judges_own(
        user, relu_problem, cpu_hardware, h200, settings):
    settings.EVALUATION_MAX_REPS = 30
    cpu_job = normalize_job(build_job(_submission(user, relu_problem, cpu_hardware)))
    assert cpu_job["timing"]["max_reps"] == 30
    assert cpu_job["timing"]["warmup"] == DEFAULT_TIMING["warmup"]  # only the cap changes
    settings.EVALUATION_MAX_REPS = 0
    assert "timing" not in build_job(_submission(user, relu_problem, cpu_hardware))
    gpu_job = normalize_job(build_job(_submission(user, relu_problem, h200)))
    assert gpu_job["timing"]["max_reps"] == DEFAULT_TIMING["max_reps"]
    settings.EVALUATION_MAX_REPS = 10_000  # a cap, never a raise
    assert normalize_job(build_job(_submission(user, relu_problem, h200)))["timing"] == (
        gpu_job["timing"])


def test_a_gpus_cluster_runs_the_configured_number_of_evaluations_and_a_cpu_slot_one(
        h200, cpu_hardware, settings):
    settings.RUNNER_EVALUATIONS_PER_GPU = 3
    gpu = worker_env(h200, "host:h200:1:dev0", 0)
    assert gpu["Q_WORKERS"] == "3"
    assert gpu["CUDA_VISIBLE_DEVICES"] == gpu["KBSITE_DEVICE_INDEX"] == "0"
    assert worker_env(cpu_hardware, "host:cpu:1", None)["Q_WORKERS"] == "1"
    # A CPU host's slots are numbered like GPUs (runner --devices 2): still one each.
    assert worker_env(cpu_hardware, "host:cpu:1:dev1", 1)["Q_WORKERS"] == "1"


def test_a_reverification_avoids_the_seed_of_a_run_made_before_one_alone(
        user, relu_problem, cpu_hardware):
    """An evaluation that ran out of memory beside others ran again alone on a fresh seed; the
    first run's seed was seen by the kernel too, so a re-verification draws neither."""
    from gpu_runner import services
    from submissions.models import Evaluation

    submission = _submission(user, relu_problem, cpu_hardware)
    Evaluation.objects.create(
        submission=submission, hardware=cpu_hardware, problem_version=submission.problem_version,
        source_hash=submission.source_hash, verdict="correct", correct=True,
        seeds={"server": 11, "earlier_runs": [22]})
    assert services._seeds_used(submission) == {11, 22}


def test_a_problem_never_validated_here_is_admitted_by_its_peak_validated_on_another_gpu(
        user, relu_problem, h200, settings, tmp_path):
    settings.RUNNER_EVALUATIONS_PER_GPU = 4
    settings.RUNNER_GATE_DIR = tmp_path / "gates"
    settings.RUNNER_PROFILE_PROCESS = False
    h100 = Hardware.objects.create(slug="h100", name="NVIDIA H100", kind=Hardware.Kind.GPU,
                                   memory_bytes=80 * GIB, gpu_count=1, backends=["torch"])
    cpu = Hardware.objects.create(slug="cpu-x", name="CPU", kind=Hardware.Kind.CPU,
                                  backends=["torch"])
    submission = _submission(user, relu_problem, h200)
    # A CPU's peak (host memory) says nothing of a GPU's: still the guess.
    _validated(relu_problem, cpu, 1 * GIB)
    assert build_job(submission)["memory_need_bytes"] == (EVALUATION_OVERHEAD_BYTES
                                                          + 3 * UNKNOWN_PEAK_BYTES)
    _validated(relu_problem, h100, 20 * GIB)
    assert build_job(submission)["memory_need_bytes"] == EVALUATION_OVERHEAD_BYTES + 60 * GIB
    # Once this hardware has its own figure, that one counts, smaller or not.
    _validated(relu_problem, h200, 1 * GIB)
    assert build_job(submission)["memory_need_bytes"] == EVALUATION_OVERHEAD_BYTES + 3 * GIB


def test_a_gpu_runner_coming_online_asks_once_for_each_validation_its_hardware_lacks(
        sample_problems, h200, django_capture_on_commit_callbacks):
    from problems.curation import validations_missing_request
    from problems.models import Problem

    published = Problem.objects.filter(status=Problem.Status.PUBLISHED)
    assert published.count() >= 2
    done = published.first()
    _validated(done, h200, 1 * GIB)
    draft = published.last()
    draft.status = Problem.Status.DRAFT
    draft.save(update_fields=["status"])

    with django_capture_on_commit_callbacks() as queued:
        asked = validations_missing_request(hardware=h200)
    wanted = set(published.exclude(pk=done.pk).values_list("current_version_id", flat=True))
    assert {v.problem_version_id for v in asked} == wanted
    assert draft.current_version_id not in wanted and len(queued) == len(asked)
    # Asked for (queued), failed, or passed: none is asked for again.
    asked[0].claim(runner_name="test-runner", lease_seconds=60)
    asked[0].finish(runner_name="test-runner", findings=[], failed=True, error="it crashed")
    assert validations_missing_request(hardware=h200) == []


def test_a_cpu_runner_asks_for_no_validations(sample_problems):
    from problems.curation import validations_missing_request

    cpu = Hardware.objects.create(slug="cpu-y", name="CPU", kind=Hardware.Kind.CPU,
                                  backends=["torch"])
    assert validations_missing_request(hardware=cpu) == []
    assert not Validation.objects.filter(hardware=cpu).exists()
