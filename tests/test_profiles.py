"""The per-kernel table and the roofline of a GPU evaluation, rendered from a stored profile
(the figures below are an H200's, from scripts/profile_check.py: a cuBLAS GEMM with a CUDA
bias+ReLU epilogue against PyTorch's GEMM, add and ReLU)."""

import pytest
from django.contrib.auth import get_user_model

from evaluation.profiles import profile_view
from evaluation.services import hardware_register
from evaluator.judge.exploits import kernel_profile
from problems.models import Problem
from tests.api_support import SchemaCheckedClient, token_for
from tests.leaderboard_factory import make_problem, make_result

pytestmark = pytest.mark.django_db

GEMM = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3"
PROFILE = {
    "basis": "torch.profiler (CUPTI): one untimed call on the first timing inputs",
    "candidate": {
        "device_total_us": 2743.7,
        "kernels": [
            {"name": GEMM, "own": False, "calls": 1, "device_us": 2703.0, "share": 0.9852},
            {"name": "bias_relu_kernel(float*, float const*, long, long)", "own": True,
             "calls": 1, "device_us": 40.7, "share": 0.0148},
        ],
    },
    "reference": {
        "device_total_us": 2751.3,
        "kernels": [
            {"name": GEMM, "own": False, "calls": 1, "device_us": 2709.2, "share": 0.9847},
            {"name": "void at::native::vectorized_elementwise_kernel<4>", "own": False,
             "calls": 2, "device_us": 42.1, "share": 0.0153},
        ],
    },
}
# 8192 x 8192 x 1024 (x2) FLOPs; the inputs it must read and the output it writes.
COST = {"flops": 137_438_953_472, "read_bytes_lower_bound": 33_554_432 + 33_554_432,
        "output_bytes": 33_554_432}


@pytest.fixture
def h200(db):
    return hardware_register(slug="h200", kind="gpu", name="NVIDIA H200",
                             peak_bandwidth_gbs=4800, peak_tflops={"fp32": 67})


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user("ada", password="a-long-passphrase-1")


@pytest.fixture
def profiled(h200, owner):
    evaluation = make_result(problem=make_problem(2, 76), hardware=h200, user=owner,
                             ms=2.7337, reference_ms=2.75)
    evaluation.profile = PROFILE
    evaluation.static_report = {"checks": {"cost": COST}}
    evaluation.save(update_fields=["profile", "static_report"])
    return evaluation


def test_the_profile_gives_each_sides_achieved_rates_against_the_hardwares_peaks(profiled):
    view = profile_view(profiled)
    candidate, reference = view["sides"]
    assert candidate["label"] == "Submitted kernel" and reference["key"] == "reference"
    # 137.4 GFLOP in 2743.7 us: 50.1 TFLOP/s, 74.8% of the fp32 peak of 67.
    assert candidate["flops_per_s"] == pytest.approx(137_438_953_472 / 2743.7e-6)
    assert candidate["flops_of_peak"] == pytest.approx(0.748, abs=0.001)
    assert candidate["bandwidth_of_peak"] == pytest.approx(100_663_296 / 2743.7e-6 / 4800e9)
    assert candidate["compute_text"] == "50.1 TFLOP/s (74.8% of peak)"
    assert '<svg' in view["roofline"] and "Roofline on NVIDIA H200" in view["roofline"]


def test_ncu_kernels_are_placed_on_the_roofline_by_themselves(profiled):
    ncu = [{"name": "bias_relu_kernel", "dram_bytes": 4.03e7, "flops": 2.52e7,
            "duration_ns": 39680}]
    chart = str(profile_view(profiled, ncu_kernels=ncu)["roofline"])
    assert "ncu: bias_relu_kernel" in chart and "ncu, per kernel" in chart
    assert chart.count("<circle") == 3  # both whole calls and the one ncu kernel


def test_the_owner_sees_the_kernel_table_and_the_roofline_on_the_submission_page(
    client, profiled, owner
):
    client.force_login(owner)
    html = client.get(f"/submissions/{profiled.submission_id}/").content.decode()
    assert 'id="kernels-candidate"' in html and 'id="kernels-reference"' in html
    assert "bias_relu_kernel(float*, float const*, long, long)" in html
    assert 'class="own"' in html and "98.5%" in html and "40.7 µs" in html
    assert "compute 50.1 TFLOP/s (74.8% of peak)" in html
    assert 'id="roofline"' in html and "<svg" in html


def test_others_do_not_see_the_kernel_names_of_a_private_problem(client, profiled):
    other = get_user_model().objects.create_user("bob", password="a-long-passphrase-1")
    client.force_login(other)
    public = client.get(f"/submissions/{profiled.submission_id}/").content.decode()
    assert "bias_relu_kernel" in public  # the code is public: so is where its time goes
    # Kernel names follow the source (selectors.can_see_source): kept from others where the
    # problem keeps its code private.
    Problem.objects.filter(pk=profiled.submission.problem_id).update(code_visibility="owner")
    html = client.get(f"/submissions/{profiled.submission_id}/").content.decode()
    assert "bias_relu_kernel" not in html and 'id="roofline"' not in html


def test_the_api_gives_the_profile_to_who_may_see_the_source(profiled, owner):
    api = SchemaCheckedClient()
    data = api.with_token(token_for(owner)).get(
        f"/api/v1/submissions/{profiled.submission_id}/").json()
    profile = data["evaluation"]["profile"]
    assert [k["name"] for k in profile["sides"][0]["kernels"]][1].startswith("bias_relu")
    assert profile["sides"][0]["kernels"][1]["own"] is True
    assert profile["peak_bandwidth_gbs"] == 4800 and "roofline" not in profile
    other = get_user_model().objects.create_user("bob", password="a-long-passphrase-1")
    # Kernel names follow the source (selectors.can_see_source): kept from others where the
    # problem keeps its code private.
    Problem.objects.filter(pk=profiled.submission.problem_id).update(code_visibility="owner")
    data = SchemaCheckedClient().with_token(token_for(other)).get(
        f"/api/v1/submissions/{profiled.submission_id}/").json()
    assert data["evaluation"]["profile"] is None


def test_the_harness_marks_the_kernels_the_source_names_and_their_shares():
    reply = {
        "device_kernels": [[GEMM, 2703.0], ["bias_relu_kernel(float*, float const*)", 40.7]],
        "kernel_calls": {GEMM: 1, "bias_relu_kernel(float*, float const*)": 1},
        "device_total_us": 2743.7,
        "call_host_ms": 2.9,
        "reference": {"device_kernels": [[GEMM, 2709.2]], "kernel_calls": {GEMM: 1},
                      "device_total_us": 2709.2},
    }
    profile = kernel_profile(reply, ["bias_relu_kernel", "relu"])
    rows = profile["candidate"]["kernels"]
    assert [r["own"] for r in rows] == [False, True]  # "relu" is no whole word of the GEMM's
    assert rows[0]["share"] == pytest.approx(0.9852, abs=1e-4) and rows[1]["calls"] == 1
    assert profile["reference"]["kernels"][0]["own"] is False


def _profiled_beside_trials(evaluation, beside: bool):
    # 19_ReLU on an H200 (issue 41): the profiling process's call beside the correctness
    # trials saw 6,128.8 us of kernel time; the evaluation timed the kernel alone at 3.248 ms.
    evaluation.profile = {"basis": PROFILE["basis"], "candidate": {
        "device_total_us": 6128.8,
        "kernels": [{"name": "relu_kernel(float const*, float*, long)", "own": True, "calls": 1,
                     "device_us": 6128.8, "share": 1.0}]}}
    evaluation.candidate_median_ms = 3.248
    evaluation.static_report = {"checks": {
        "cost": {"read_bytes_lower_bound": 6_442_450_944, "output_bytes": 6_442_450_944},
        "profiler": {"beside_trials": beside, "process": "profiler"}}}
    evaluation.save(update_fields=["profile", "candidate_median_ms", "static_report"])
    return evaluation


def test_a_profile_taken_beside_other_work_is_scaled_to_the_timed_median_and_says_so(
        profiled, owner, client):
    (candidate,) = profile_view(_profiled_beside_trials(profiled, True))["sides"]
    assert candidate["device_total_us"] == pytest.approx(3248.0)
    assert candidate["kernels"][0]["device_us"] == pytest.approx(3248.0)
    assert candidate["measured_total_us"] == 6128.8
    # 12.9 GB in 3.248 ms: 3.97 TB/s, 82.6% of 4.8 TB/s (Nsight Compute: 82.5%), not 43.8%.
    assert candidate["bandwidth_of_peak"] == pytest.approx(0.826, abs=0.001)
    assert "Scaled to the timed median" in candidate["scaled"] and "6,128.8" in candidate["scaled"]
    client.force_login(owner)
    html = client.get(f"/submissions/{profiled.submission_id}/").content.decode()
    assert "Scaled to the timed median" in html and "3,248.0 µs" in html


def test_a_profile_that_had_the_device_to_itself_is_shown_as_measured(profiled):
    (candidate,) = profile_view(_profiled_beside_trials(profiled, False))["sides"]
    assert candidate["device_total_us"] == 6128.8 and candidate["scaled"] == ""
    assert candidate["bandwidth_of_peak"] == pytest.approx(0.438, abs=0.001)


def test_kb_prints_that_a_profile_was_scaled(profiled):
    from kbcli.main import profile_text

    text = profile_text(profile_view(_profiled_beside_trials(profiled, True)))
    assert "Scaled to the timed median" in text and "3,248.0 us" in text
