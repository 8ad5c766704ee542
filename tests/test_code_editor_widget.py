"""The code field's widget (submissions.forms.CodeEditor): a textarea marked for the editor, with
CodeMirror's files where `make` installed them (settings.CODE_EDITOR_ASSETS) and none otherwise,
so that the page is the plain textarea then."""

import pytest
from django.test import Client

from submissions.forms import KernelSourceForm
from submissions.models import Submission


def test_the_field_is_a_textarea_marked_for_the_editor():
    html = str(KernelSourceForm()["source"])
    assert html.startswith("<textarea") and 'data-code-editor="python"' in html


def test_with_the_assets_installed_the_form_brings_codemirror_and_the_starter_script(settings):
    settings.CODE_EDITOR_ASSETS = True
    media = str(KernelSourceForm().media)
    for path in ("codemirror/lib/codemirror.css", "codemirror/lib/codemirror.js",
                 "codemirror/mode/python/python.js", "kbsite/code-editor.js"):
        assert f"/static/{path}" in media, path


def test_without_them_the_form_brings_nothing_and_the_textarea_stays(settings):
    settings.CODE_EDITOR_ASSETS = False
    assert str(KernelSourceForm().media) == ""


@pytest.mark.django_db
def test_the_submit_page_works_without_the_editor_files(settings, user, cpu_hardware,
                                                        relu_problem):
    settings.CODE_EDITOR_ASSETS = False
    client = Client()
    client.force_login(user)
    html = client.get(f"/submissions/new/?problem={relu_problem.pk}").content.decode()
    assert "codemirror" not in html
    assert 'data-code-editor="python"' in html
    response = client.post("/submissions/new/", {
        "problem": relu_problem.pk, "backend": "torch", "hardware": "cpu", "precision": "fp32",
        "source": "import torch\r\n\r\n\r\nclass ModelNew(torch.nn.Module):\r\n    pass\r\n",
    })
    assert response.status_code == 302, response.content.decode()[-2000:]
    # The browser's CR LF line ends come back as the file's LF.
    assert Submission.objects.get().source.startswith("import torch\n\n\nclass ModelNew")


def test_the_settings_find_codemirror_in_node_modules():
    from django.conf import settings as real

    assert real.CODE_EDITOR_ASSETS, "node_modules/codemirror is missing: run `make` (npm ci)"
    assert (real.CODEMIRROR_DIR / "mode" / "python" / "python.js").is_file()
