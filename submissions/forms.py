from django import forms
from django.conf import settings

from evaluation.models import Hardware
from evaluator import backends
from problems.models import Problem
from submissions.models import Submission
from submissions.services import PRECISIONS
from submissions.sources import decode_source


def backend_choices() -> list[tuple[str, str]]:
    """The backends' table as (name, label): a callable, so that a form reads the table when it
    is made and a new language is offered without an edit here."""
    return [(name, backends.LABELS[name]) for name in backends.NAMES]


class ProblemChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, problem: Problem) -> str:
        return f"{problem.slug} ({problem.name})" if problem.name else problem.slug


class CodeEditor(forms.Textarea):
    """A textarea that static/kbsite/code-editor.js turns into a CodeMirror editor (npm's
    `codemirror`, served from node_modules/ where `make` installed it: settings.CODE_EDITOR_ASSETS).

    The textarea stays the form's field: the editor copies its text back on submit, and without
    the editor's files or without JavaScript the page is the plain textarea and works as well.
    """

    def __init__(self, attrs: dict | None = None) -> None:
        base = {"rows": 18, "spellcheck": "false", "class": "code", "data-code-editor": "python"}
        super().__init__({**base, **(attrs or {})})

    @property
    def media(self) -> forms.Media:
        if not getattr(settings, "CODE_EDITOR_ASSETS", False):
            return forms.Media()
        return forms.Media(
            css={"all": ["codemirror/lib/codemirror.css"]},
            js=[
                "codemirror/lib/codemirror.js",
                "codemirror/mode/python/python.js",
                "kbsite/code-editor.js",
            ],
        )


class KernelSourceForm(forms.Form):
    """A kernel's code: an uploaded .py file, or pasted text (in a code editor where it loads)."""

    source_file = forms.FileField(required=False, label="Upload a .py file")
    source = forms.CharField(
        required=False, strip=False, label="or paste the code", widget=CodeEditor()
    )

    def clean(self):
        cleaned = super().clean()
        if not cleaned.get("source_file") and not (cleaned.get("source") or "").strip():
            raise forms.ValidationError("Upload a file or paste the code.")
        return cleaned

    def kernel_source(self) -> tuple[str, str]:
        """(source, filename) of a valid form; SubmissionError when the file is not UTF-8."""
        upload = self.cleaned_data.get("source_file")
        if upload:
            return decode_source(upload.read()), upload.name
        # Browsers send a textarea's lines ending in CR LF; the file had LF.
        return self.cleaned_data["source"].replace("\r\n", "\n"), ""


# What an evaluation is for: (test_run, timed) of each choice of SubmissionForm.purpose.
PURPOSES = {"ranked": (False, True), "test": (True, False), "test_timed": (True, True)}


class SubmissionForm(KernelSourceForm):
    field_order = ["problem", "backend", "hardware", "precision", "source_file", "source",
                   "purpose"]

    problem = ProblemChoiceField(queryset=Problem.objects.none())
    backend = forms.ChoiceField(choices=backend_choices, initial="torch")
    hardware = forms.ModelChoiceField(queryset=Hardware.objects.all(), to_field_name="slug")
    precision = forms.ChoiceField(choices=[(p, p) for p in PRECISIONS], initial="fp32")
    purpose = forms.ChoiceField(
        label="Evaluation",
        choices=[
            ("ranked", "Submit for ranking: checked, timed, and ranked on the board"),
            ("test", "Test run: correctness only, never ranked (quicker, less of your quota)"),
            ("test_timed", "Test run with timing: correctness and speed, never ranked"),
        ],
        initial="ranked",
        required=False,
        widget=forms.RadioSelect,
    )

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Only the problems this user may submit to (drafts and held ones for staff only).
        self.fields["problem"].queryset = Problem.objects.open_for_submissions(user).order_by(
            "level", "number"
        )

    def test_run_and_timed(self) -> tuple[bool, bool]:
        """(test_run, timed) of a valid form; left out, a ranked submission."""
        return PURPOSES.get(self.cleaned_data.get("purpose") or "ranked", PURPOSES["ranked"])


class SubmissionFilterForm(forms.Form):
    """The filters of a user's submission list; an invalid value is ignored, not an error."""

    status = forms.ChoiceField(
        choices=[("", "any status"), *Submission.Status.choices], required=False
    )
    verdict = forms.CharField(required=False)
    backend = forms.ChoiceField(
        choices=lambda: [("", "any backend"), *backend_choices()], required=False
    )
    hardware = forms.CharField(required=False)
    problem = forms.CharField(required=False, label="problem contains")
