"""A source that is not Python, or defines no ModelNew, is refused at upload (form, API, batch,
and the `kb` CLI in test_cli.py), with the line, and never takes a runner slot."""

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django_q.models import OrmQ

from submissions.models import Submission
from submissions.sources import SourceError, check_kernel_source
from tests.api_support import SchemaCheckedClient, token_for
from tests.conftest import REPO, kernel_source
from tests.sandbox.conftest import KERNELS as ATTACK_KERNELS
from tests.sandbox.conftest import render

pytestmark = pytest.mark.django_db

RELU = kernel_source("relu_correct.py")
# The correct kernel with its forward's signature left open.
SIGNATURE = "    def forward(self, x: torch.Tensor) -> torch.Tensor:"
BROKEN = RELU.replace(SIGNATURE, "    def forward(self, x: torch.Tensor -> torch.Tensor:")
BROKEN_LINE = RELU.splitlines().index(SIGNATURE) + 1
NO_MODEL_NEW = RELU.replace("class ModelNew(", "class MyKernel(")


@pytest.fixture
def api(user):
    return SchemaCheckedClient().with_token(token_for(user))


def payload(**overrides) -> dict:
    return {"level": 1, "number": 901, "backend": "torch", "hardware": "cpu", "source": RELU,
            **overrides}


def nothing_queued() -> bool:
    return Submission.objects.count() == 0 and OrmQ.objects.count() == 0


def refusal(source: str) -> SourceError:
    with pytest.raises(SourceError) as caught:
        check_kernel_source(source)
    return caught.value


# ---- the rule -----------------------------------------------------------------------------------


def test_it_refuses_a_syntax_error_and_names_the_line():
    error = refusal(BROKEN)
    assert error.code == "syntax_error" and error.line == BROKEN_LINE
    assert f"line {BROKEN_LINE}" in error.message
    assert "def forward(self, x: torch.Tensor ->" in error.message  # the line itself, quoted


def test_it_names_the_line_of_an_indentation_error():
    error = refusal("import torch\n\nclass ModelNew:\ndef forward(self):\n    pass\n")
    assert error.code == "syntax_error" and error.line == 4


def test_it_refuses_a_source_without_model_new():
    error = refusal(NO_MODEL_NEW)
    assert error.code == "no_model_new" and error.line is None
    assert "ModelNew" in error.message


def test_it_tells_a_submitter_who_kept_the_reference_name_to_rename_it():
    assert "name your class ModelNew" in refusal(RELU.replace("ModelNew", "Model")).message


def test_it_refuses_a_model_new_that_only_a_function_defines_locally():
    source = "import torch\n\ndef build():\n    class ModelNew(torch.nn.Module):\n        pass\n"
    assert refusal(source).code == "no_model_new"


@pytest.mark.parametrize(
    "source",
    [
        "class ModelNew:\n    pass\n",
        "import torch\nModelNew = torch.nn.ReLU\n",
        "import torch\nModelNew: type = torch.nn.ReLU\n",
        "from torch.nn import ReLU as ModelNew\n",
        "def ModelNew():\n    return None\n",
        "try:\n    import triton\n    class ModelNew:\n        pass\nexcept ImportError:\n"
        "    ModelNew = None\n",
        "if True:\n    Model, ModelNew = object, object\n",
        "for ModelNew in [object]:\n    pass\n",
        "import sys\nsys.modules[__name__].ModelNew = object\n",
        "globals()['ModelNew'] = object\n",
        "setattr(__import__('sys').modules[__name__], 'ModelNew', object)\n",
        "def make():\n    global ModelNew\n    ModelNew = object\n\nmake()\n",
        "exec('class ModelNew:\\n    pass\\n')\n",
    ],
    ids=["class", "assignment", "annotated", "import", "def", "try", "tuple", "loop",
         "module-attribute", "globals", "setattr", "global", "exec"],
)
def test_it_accepts_model_new_bound_by_any_means_it_can_see(source):
    check_kernel_source(source)


def test_it_only_parses_and_never_runs_the_source(tmp_path):
    marker = tmp_path / "ran"
    check_kernel_source(
        f"open({str(marker)!r}, 'w').write('ran')\nclass ModelNew:\n    pass\n"
    )
    with pytest.raises(SourceError):
        check_kernel_source(f"open({str(marker)!r}, 'w').write('ran')\n")
    assert not marker.exists()


def test_a_deeply_nested_source_is_a_syntax_error_not_a_crash():
    assert refusal("x = " + "(" * 100_000 + ")" * 100_000 + "\n").code == "syntax_error"


def test_every_kernel_of_the_test_and_gpu_suites_passes_the_check():
    folders = ["tests/kernels", "tests/exploits/kernels", "gpu_kernels"]
    kernels = [path for folder in folders for path in sorted((REPO / folder).rglob("*.py"))]
    assert len(kernels) > 30
    for path in kernels:
        check_kernel_source(path.read_text())
    # The attack kernels as they are submitted: the shared prelude put in place of its import.
    attacks = sorted(p.stem for p in Path(ATTACK_KERNELS).glob("*.py") if p.stem != "common")
    assert attacks
    for name in attacks:
        check_kernel_source(render(name))


# ---- every way in -------------------------------------------------------------------------------


def test_the_api_refuses_a_syntax_error_at_once_with_the_line(api, cpu_hardware, relu_problem):
    response = api.post("/api/v1/submissions/", payload(source=BROKEN), format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "syntax_error" and body["line"] == BROKEN_LINE
    assert f"line {BROKEN_LINE}" in body["detail"]
    assert nothing_queued()


def test_the_api_refuses_a_source_without_model_new(api, cpu_hardware, relu_problem):
    response = api.post("/api/v1/submissions/", payload(source=NO_MODEL_NEW), format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "no_model_new" and "line" not in response.json()
    assert nothing_queued()


def test_the_api_refuses_an_uploaded_file_that_does_not_parse(api, cpu_hardware, relu_problem):
    fields = payload()
    fields.pop("source")
    upload = SimpleUploadedFile("broken.py", BROKEN.encode())
    response = api.post("/api/v1/submissions/", {**fields, "file": upload}, format="multipart")
    assert response.status_code == 400
    assert response.json()["line"] == BROKEN_LINE
    assert nothing_queued()


def test_a_batch_with_one_broken_item_stores_none_and_names_its_index_and_line(
    api, cpu_hardware, relu_problem
):
    response = api.post(
        "/api/v1/submissions/batch/",
        {"submissions": [payload(), payload(source=BROKEN), payload(source=NO_MODEL_NEW)]},
        format="json",
    )
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert [(e["index"], e["code"]) for e in errors] == [(1, "syntax_error"), (2, "no_model_new")]
    assert errors[0]["line"] == BROKEN_LINE
    assert nothing_queued()


def test_the_form_refuses_a_syntax_error_and_shows_the_line(user, cpu_hardware, relu_problem):
    client = Client()
    client.force_login(user)
    response = client.post(
        "/submissions/new/",
        {"problem": relu_problem.pk, "backend": "torch", "hardware": "cpu",
         "precision": "fp32", "source": BROKEN},
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "not valid Python" in page and f"line {BROKEN_LINE}" in page
    assert nothing_queued()


def test_the_form_refuses_an_uploaded_file_without_model_new(user, cpu_hardware, relu_problem):
    client = Client()
    client.force_login(user)
    upload = SimpleUploadedFile("kernel.py", NO_MODEL_NEW.encode())
    response = client.post(
        "/submissions/new/",
        {"problem": relu_problem.pk, "backend": "torch", "hardware": "cpu",
         "precision": "fp32", "source": "", "source_file": upload},
    )
    assert response.status_code == 400
    assert "defines no ModelNew" in response.content.decode()
    assert nothing_queued()


def test_a_valid_kernel_is_still_accepted(api, cpu_hardware, relu_problem):
    response = api.post("/api/v1/submissions/", payload(), format="json")
    assert response.status_code == 202
    assert Submission.objects.count() == 1
