"""Starter kernels per backend (problems/starters.py): one renderer for the submit page, the
competition entry form and GET /api/v1/problems/<slug>/starter/?backend=B.

Here, what the pages and the API give and to whom, in-process. That a starter is judged correct
takes the real harness (a C++ build alone takes most of a minute): the PyTorch and Triton
starters of every sample problem and the C++ one of level2/901_Small_Linear_GELU were judged
correct on the CPU runner's harness when they were written; the CUDA one needs a GPU run.
"""

import ast

import pytest

from problems.models import Problem
from problems.starters import BACKENDS, StarterError, starter_source
from tests.api_support import SchemaCheckedClient

pytestmark = pytest.mark.django_db

RELU = "level1/901_Small_ReLU"


def test_every_backend_renders_valid_python_defining_model_new_for_every_sample(
    sample_problems,
):
    marks = {"cuda": "cuda_sources=", "cpp": "load_inline(", "triton": "@triton.jit", "torch": "",
             "helion": "@helion.kernel(config=helion.Config(", "tilelang": "@T.prim_func",
             "cute": "@cute.kernel", "cutile": "@ct.kernel"}
    for problem in sample_problems.values():
        for backend in BACKENDS:
            source = starter_source(problem=problem, backend=backend)
            tree = ast.parse(source)
            classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
            assert "ModelNew" in classes and "Model" not in classes, (problem.slug, backend)
            assert marks[backend] in source
            compile(source, f"{backend}.py", "exec")  # Python, not only a tree
            if backend != "torch":
                # The reference's ops, then each output through the backend's kernel.
                assert "class ModelNew(Reference):" in source and "pass_through" in source


def test_a_compiled_starter_names_its_extension_after_the_problem_and_backend(sample_problems):
    source = starter_source(problem=sample_problems[RELU], backend="cuda")
    assert 'name="kb_starter_cuda_level1_901_small_relu"' in source


def test_an_unknown_backend_is_refused_with_the_ones_there_are(sample_problems):
    with pytest.raises(StarterError, match="one of cuda, triton, torch, cpp"):
        starter_source(problem=sample_problems[RELU], backend="fortran")


def test_the_api_gives_a_starter_for_a_problem_and_backend(sample_problems):
    api = SchemaCheckedClient()
    response = api.get(f"/api/v1/problems/{RELU}/starter/", {"backend": "triton"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["problem"] == RELU and body["backend"] == "triton"
    assert body["source"] == starter_source(problem=sample_problems[RELU], backend="triton")
    assert body["filename"] == "level1_901_Small_ReLU_triton.py"


def test_the_api_says_which_backends_there_are_when_none_or_a_wrong_one_is_asked(
    sample_problems,
):
    api = SchemaCheckedClient()
    for query in ({}, {"backend": "fortran"}):
        response = api.get(f"/api/v1/problems/{RELU}/starter/", query)
        assert response.status_code == 400
        assert response.json()["code"] == "unknown_backend"
        assert response.json()["allowed"] == list(BACKENDS)


def test_the_api_gives_no_starter_for_a_draft_or_an_unknown_problem(sample_problems):
    api = SchemaCheckedClient()
    Problem.objects.filter(slug=RELU).update(status=Problem.Status.DRAFT)
    assert api.get(f"/api/v1/problems/{RELU}/starter/", {"backend": "torch"}).status_code == 404
    missing = api.get("/api/v1/problems/level9/1_Nothing/starter/", {"backend": "torch"})
    assert missing.status_code == 404


def test_the_submit_page_starts_from_the_chosen_backends_starter_where_the_hardware_runs_it(
    client, user, sample_problems, cpu_hardware
):
    client.force_login(user)
    page = client.get("/submissions/new/", {"problem": RELU, "backend": "triton"}).content.decode()
    assert f"# A Triton starter for {RELU}" in page
    assert '<option value="triton" selected>Triton</option>' in page
    # The CPU runs no CUDA and no GPU-only language: neither offered nor started from.
    for gpu_only in ("cuda", "helion", "tilelang", "cute", "cutile"):
        page = client.get("/submissions/new/",
                          {"problem": RELU, "backend": gpu_only}).content.decode()
        assert "starter for" not in page and f'value="{gpu_only}"' not in page


def test_the_submit_page_offers_helion_and_its_starter_where_a_gpu_serves_it(
    client, user, sample_problems, cpu_hardware
):
    from evaluation.services import hardware_register

    hardware_register(slug="h200", name="NVIDIA H200", kind="gpu",
                      backends=["cuda", "triton", "torch", "helion"])
    client.force_login(user)
    page = client.get("/submissions/new/", {"problem": RELU, "backend": "helion"}).content.decode()
    assert f"# A Helion starter for {RELU}" in page
    assert '<option value="helion" selected>Helion</option>' in page
    assert "h200 runs CUDA, Triton, PyTorch, Helion" in page


@pytest.mark.parametrize(("backend", "label"), [("tilelang", "TileLang"), ("cute", "CuTe DSL"),
                                                ("cutile", "cuTile")])
def test_the_submit_page_offers_each_kernel_language_only_where_a_gpu_serves_it(
    client, user, sample_problems, cpu_hardware, backend, label
):
    from evaluation.services import hardware_register

    # A GPU whose runner's self-test passed the language, and one whose did not (an H200 for
    # cuTile: its compiler does not target Hopper).
    hardware_register(slug="b200", name="NVIDIA B200", kind="gpu",
                      backends=["cuda", "triton", "torch", backend])
    hardware_register(slug="h200", name="NVIDIA H200", kind="gpu",
                      backends=["cuda", "triton", "torch"])
    client.force_login(user)
    page = client.get("/submissions/new/", {"problem": RELU, "backend": backend}).content.decode()
    assert f"# A {label} starter for {RELU}" in page
    assert f'<option value="{backend}" selected>{label}</option>' in page
    assert f"b200 runs CUDA, Triton, PyTorch, {label}" in page
    assert f"h200 runs CUDA, Triton, PyTorch, {label}" not in page
    # Served by no hardware, it is neither offered nor started from.
    hardware_register(slug="b200", name="NVIDIA B200", kind="gpu",
                      backends=["cuda", "triton", "torch"])
    page = client.get("/submissions/new/", {"problem": RELU, "backend": backend}).content.decode()
    assert "starter for" not in page and f'value="{backend}"' not in page
