"""Compile errors a person can read (evaluation/compile_log.py): the compiler's first error at
the submitted file's line, no host paths, no harness warnings. Pure functions, no database."""

import pytest

from evaluation.compile_log import drop_harness_warnings, first_error, readable, scrub_paths

# What a submitter wrote: a CUDA kernel through load_inline, with a typo on line 9 of the file.
SUBMITTED = '''import torch
from torch.utils.cpp_extension import load_inline

cuda_source = """
__global__ void fused_add_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
torch::Tensor fused_add(torch::Tensor a, torch::Tensor b) { return a + bb; }
"""
cpp_source = "torch::Tensor fused_add(torch::Tensor a, torch::Tensor b);"

ext = load_inline(name="fused_add", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["fused_add"])


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return ext.fused_add(a, b)
'''

VENV = "/srv/runner-7/kbsite/.venv"
BUILD = "/var/lib/kbsite/build-cache/ext/3c9d1e0a2b4f6c8e1a2b3c4d/fused_add"
# The log the worker captured, as a real ninja/nvcc build on a runner writes it (cut short).
LOG = f"""Using {BUILD[:-10]} as PyTorch extensions root...
Creating extension directory {BUILD}...
Detected CUDA files, patching ldflags
Emitting ninja build file {BUILD}/build.ninja...
{VENV}/lib/python3.11/site-packages/torch/utils/cpp_extension.py:2356: FutureWarning: \
TORCH_CUDA_ARCH_LIST is not set, all archs for visible cards are included for compilation.
  warnings.warn(
Building extension module fused_add...
Allowing ninja to set a default number of workers... (overridable by setting MAX_JOBS=N)
[1/3] /usr/local/cuda-12.8/bin/nvcc --generate-dependencies-with-compile --dependency-output \
cuda.cuda.o.d -DTORCH_EXTENSION_NAME=fused_add -isystem \
{VENV}/lib/python3.11/site-packages/torch/include -isystem /usr/local/cuda-12.8/include \
-isystem /usr/include/python3.11 -gencode=arch=compute_90a,code=sm_90a --compiler-options \
'-fPIC' -std=c++17 -c {BUILD}/cuda.cu -o cuda.cuda.o
FAILED: cuda.cuda.o
{BUILD}/cuda.cu(9): error: identifier "bb" is undefined
  torch::Tensor fused_add(torch::Tensor a, torch::Tensor b) {{ return a + bb; }}
                                                                         ^

1 error detected in the compilation of "{BUILD}/cuda.cu".
[2/3] c++ -MMD -MF main.o.d -isystem {VENV}/lib/python3.11/site-packages/torch/include \
-c {BUILD}/main.cpp -o main.o
ninja: build stopped: subcommand failed.
Traceback (most recent call last):
  File "{VENV}/lib/python3.11/site-packages/torch/utils/cpp_extension.py", line 2597, in _run
  File "/tmp/kb-work-81f3/candidate.py", line 13, in <module>
RuntimeError: Error building extension 'fused_add'
"""


def test_the_first_error_names_the_line_of_the_submitted_file():
    error = first_error(LOG, source=SUBMITTED)
    assert error["message"] == 'identifier "bb" is undefined'
    assert (error["file"], error["line"]) == ("cuda.cu", 9)
    assert error["source_line"] == 9  # cuda.cu's 3 implicit headers, the literal from line 4
    assert SUBMITTED.splitlines()[error["source_line"] - 1].endswith("return a + bb; }")
    assert "return a + bb;" in error["excerpt"]
    assert error["summary"] == (
        'line 9 of your file (cuda.cu line 9): identifier "bb" is undefined'
    )


def test_a_gcc_error_in_main_cpp_maps_onto_the_cpp_sources_literal():
    log = "/x/build/fused_add/main.cpp:2:15: error: 'Tensr' in namespace 'torch' does not name\n"
    source = SUBMITTED.replace('cpp_source = "torch::Tensor', 'cpp_source = "torch::Tensr')
    error = first_error(log, source=source)
    assert (error["file"], error["line"], error["column"]) == ("main.cpp", 2, 15)
    assert error["source_line"] == 11


def test_an_error_outside_the_submitted_strings_keeps_the_generated_files_line():
    error = first_error("/b/cuda.cu(1): error: cannot open source file\n", source=SUBMITTED)
    assert error["source_line"] is None and error["summary"].startswith("cuda.cu line 1:")


def test_a_python_error_in_the_submitted_file_is_found_too():
    log = ('Traceback (most recent call last):\n  File "/tmp/w/candidate.py", line 7, in k\n'
           "triton.compiler.errors.CompilationError: at 3:4: undefined name\n")
    error = first_error(log, source=SUBMITTED)
    assert error["source_line"] == 7 and "CompilationError" in error["message"]


def test_the_log_shown_has_no_host_paths():
    shown = readable(LOG, known={"<venv>": VENV})
    for host in (VENV, BUILD, "/srv/", "/var/lib/", "/usr/local/cuda", "/tmp/kb-work",
                 "/usr/include/python3.11"):
        assert host not in shown, host
    assert "-c <build>/cuda.cu -o cuda.cuda.o" in shown
    assert "<build>/cuda.cu(9): error: identifier \"bb\" is undefined" in shown
    assert "<venv>/lib/python3.11/site-packages/torch/include" in shown
    assert "<cuda>/bin/nvcc" in shown and 'File "candidate.py", line 13' in shown


def test_generic_placeholders_need_no_known_paths():
    shown = scrub_paths(f"{VENV}/bin/python3.11 -m x; /home/alice/kb/.venv/lib/foo.so")
    assert shown == "<python> -m x; <venv>/lib/foo.so"


def test_harness_warnings_are_left_out_and_the_submitters_own_kept():
    log = (f"{VENV}/lib/python3.11/site-packages/torch/cuda/__init__.py:61: FutureWarning: "
           "The pynvml package is deprecated.\n  import pynvml\n"
           "/tmp/w/candidate.py:5: UserWarning: my own warning\n  warnings.warn('x')\n"
           "kernel printed this\n")
    shown = drop_harness_warnings(log)
    assert "FutureWarning" not in shown and "pynvml" not in shown
    assert "my own warning" in shown and "kernel printed this" in shown
    assert "FutureWarning" not in readable(LOG)


def test_a_log_made_to_be_slow_is_read_in_linear_time():
    # The log is the candidate's to fill: a lazy path pattern took minutes over "/a/a/a...".
    import time

    hostile = ["/a" * 32000, "/" + "a/" * 20000 + " ", "/tmp/" * 13000, "x /a" * 16000,
               "Creating extension directory " + "/a" * 30000 + "...", 'File "' * 10000,
               "-c " + "/a" * 30000 + "/cuda.cu", "/" * 64000]
    started = time.perf_counter()
    for text in hostile:
        readable(text)
        first_error(text, source=SUBMITTED)
    assert time.perf_counter() - started < 1.5


@pytest.mark.django_db
def test_the_page_and_the_api_show_the_first_error_and_fold_the_log():
    from django.contrib.auth import get_user_model
    from django.test import Client

    from evaluation.services import hardware_register
    from problems.models import source_hash
    from submissions.models import Evaluation, Submission
    from tests.api_support import token_for
    from tests.leaderboard_factory import make_problem

    user = get_user_model().objects.create_user(username="alice")
    cpu_hardware = hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")
    problem = make_problem(1, 1)
    submission = Submission.objects.create(
        user=user, problem=problem, problem_version=problem.current_version,
        hardware=cpu_hardware, backend="cuda", source=SUBMITTED,
        source_hash=source_hash(SUBMITTED), status=Submission.Status.FINISHED,
        verdict="compile_error",
    )
    Evaluation.objects.create(
        submission=submission, hardware=cpu_hardware, problem_version=problem.current_version,
        source_hash=submission.source_hash, verdict="compile_error",
        error=f"RuntimeError: Error building extension 'fused_add': {LOG}", compile_log=LOG,
    )
    client = Client()
    client.force_login(user)
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert "line 9 of your file (cuda.cu line 9): identifier &quot;bb&quot; is undefined" in page
    assert 'id="compile-log-details"' in page and "FutureWarning" not in page
    assert '<span class="hll"><span class="linenos"> 9</span>' in page  # the line, marked
    for host in (VENV, BUILD, "/usr/local/cuda", "/tmp/kb-work"):
        assert host not in page, host
    api = Client(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    evaluation = api.get(f"/api/v1/submissions/{submission.pk}/").json()["evaluation"]
    assert evaluation["compile_error"]["source_line"] == 9
    assert VENV not in evaluation["compile_log"] and BUILD not in evaluation["error"]
