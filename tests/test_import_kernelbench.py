"""Importing KernelBench: the problem folder and the dataset's files, read as text, never run."""

import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from problems.importing import ImportSourceError
from problems.models import Problem, ProblemVersion
from problems.services import problems_import
from submissions.models import Evaluation, Submission
from tests.conftest import KERNELBENCH

pytestmark = pytest.mark.django_db

PROBLEMS = Path(__file__).resolve().parent / "problems"


def problem_text(name: str) -> str:
    return (PROBLEMS / f"{name}.py").read_text()


def write_folder(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def dataset_rows() -> list[dict]:
    return [
        {"code": problem_text("sound"), "level": 1, "name": "1_Sound_linear.py", "problem_id": 1},
        {"code": problem_text("near_zero_output"), "level": 1, "name": "2_Centered_mean.py",
         "problem_id": 2},
        # Older copies of the dataset carry the name without its number and ".py".
        {"code": problem_text("ignores_an_input"), "level": 2, "name": "Ignores_targets",
         "problem_id": 7},
        {"code": "def broken(:\n", "level": 2, "name": "8_Broken.py", "problem_id": 8},
    ]


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="shared/kernelbench is not beside the repo")
def test_importing_kernelbench_yields_270_problems_and_a_second_import_changes_nothing():
    first = problems_import(path=KERNELBENCH)

    assert first.skipped == []
    assert len(first.created) == 270
    counts = {level: Problem.objects.filter(level=level).count() for level in (1, 2, 3, 4)}
    assert counts == {1: 100, 2: 100, 3: 50, 4: 20}
    relu = Problem.objects.get(slug="level1/19_ReLU")
    assert (relu.level, relu.number, relu.name) == (1, 19, "ReLU")
    assert relu.status == Problem.Status.DRAFT
    assert relu.description == "Simple model that performs a ReLU activation."
    assert relu.current_version.origin == "level1/19_ReLU.py"
    assert relu.source == (KERNELBENCH / "level1" / "19_ReLU.py").read_text()

    versions_before = ProblemVersion.objects.count()
    second = problems_import(path=KERNELBENCH)

    assert (second.created, second.new_versions) == ([], [])
    assert len(second.unchanged) == 270
    assert ProblemVersion.objects.count() == versions_before == 270


def test_a_changed_file_becomes_a_new_version_and_evaluations_keep_the_old_one(
    tmp_path, cpu_hardware, user
):
    folder = write_folder(tmp_path / "kb", {"level1/5_Sound.py": problem_text("sound")})
    problems_import(path=folder)
    problem = Problem.objects.get(slug="level1/5_Sound")
    old_version = problem.current_version
    submission = Submission.objects.create(
        user=user, problem=problem, problem_version=old_version, hardware=cpu_hardware,
        backend="torch", source="class ModelNew: pass", source_hash="x",
    )
    evaluation = Evaluation.objects.create(
        submission=submission, hardware=cpu_hardware, problem_version=old_version,
        verdict=Evaluation.Verdict.CORRECT, correct=True, source_hash="x",
    )

    changed = problem_text("sound").replace("batch_size = 16", "batch_size = 32")
    (folder / "level1" / "5_Sound.py").write_text(changed)
    report = problems_import(path=folder)

    assert report.new_versions == ["level1/5_Sound"]
    problem.refresh_from_db()
    assert problem.current_version.version == 2
    assert problem.source == changed
    assert problem.versions.count() == 2
    evaluation.refresh_from_db()
    submission.refresh_from_db()
    assert evaluation.problem_version_id == old_version.pk
    assert submission.problem_version_id == old_version.pk
    assert "batch_size = 16" in evaluation.problem_version.source


def test_bad_files_are_reported_by_name_and_skipped_while_the_rest_import(tmp_path):
    folder = write_folder(tmp_path / "kb", {
        "level1/1_Good.py": problem_text("sound"),
        "level1/2_Syntax.py": "class Model(nn.Module:\n    pass\n",
        "level1/3_No_model.py": "def get_inputs():\n    return []\n\ndef get_init_inputs():\n"
                                "    return []\n",
        "level1/4_No_inputs.py": "class Model:\n    pass\n\ndef get_init_inputs():\n"
                                 "    return []\n",
        "level1/helpers.py": problem_text("sound"),
        "level1/README.md": "not a problem",
        "level2/1_Latin1.py": "x = 'caf\xe9'\n",
    })
    (folder / "level2" / "1_Latin1.py").write_bytes("x = 'café'\n".encode("latin-1"))

    report = problems_import(path=folder)

    assert report.created == ["level1/1_Good"]
    skipped = dict(report.skipped)
    assert skipped.pop("level1/2_Syntax.py").startswith("syntax error on line 1: ")
    assert skipped == {
        "level1/3_No_model.py": "no Model class",
        "level1/4_No_inputs.py": "no get_inputs function",
        "level1/helpers.py": "file name is not <number>_<Name>.py",
        "level2/1_Latin1.py": "not UTF-8 text",
    }
    assert Problem.objects.count() == 1


def test_the_importer_reads_files_and_never_runs_them(tmp_path):
    marker = tmp_path / "ran"
    source = (
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "import torch\n\nclass Model(torch.nn.Module):\n    pass\n\n"
        "def get_inputs():\n    open('x', 'w')\n    return []\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    folder = write_folder(tmp_path / "kb", {"level1/1_Side_effects.py": source})

    report = problems_import(path=folder)

    assert report.created == ["level1/1_Side_effects"]
    assert not marker.exists()


def test_it_imports_the_dataset_from_json_lines_without_pyarrow(tmp_path, monkeypatch):
    # Without pyarrow at all, JSON lines still import.
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)
    path = tmp_path / "kernelbench.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in dataset_rows()) + "\n\n{oops\n")

    report = problems_import(path=path, tags=["kernelbench"])

    assert sorted(report.created) == [
        "level1/1_Sound_linear", "level1/2_Centered_mean", "level2/7_Ignores_targets",
    ]
    assert [label for label, _ in report.skipped] == [
        "level2/8_Broken (kernelbench.jsonl row 4)", "kernelbench.jsonl row 6",
    ]
    assert report.skipped[0][1].startswith("syntax error on line 1")
    assert report.skipped[1][1].startswith("not valid JSON")
    problem = Problem.objects.get(slug="level1/1_Sound_linear")
    assert problem.source == problem_text("sound")
    assert problem.current_version.origin == "kernelbench.jsonl#1"
    # The tags asked for, and what the name says ("linear": a matmul).
    assert sorted(tag.name for tag in problem.tags.all()) == ["kernelbench", "matmul"]

    again = problems_import(path=path)
    assert again.created == [] and len(again.unchanged) == 3


def test_parquet_without_pyarrow_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)
    monkeypatch.setitem(__import__("sys").modules, "pyarrow.parquet", None)
    (tmp_path / "level_1.parquet").write_bytes(b"PAR1")

    with pytest.raises(ImportSourceError, match="reading parquet needs the pyarrow package"):
        problems_import(path=tmp_path / "level_1.parquet")


def test_it_imports_the_dataset_from_parquet_files_as_published(tmp_path):
    pyarrow = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")

    # The dataset's layout: one parquet file per level split.
    rows = dataset_rows()
    data = tmp_path / "data"
    data.mkdir()
    for level in (1, 2):
        table = pyarrow.Table.from_pylist([r for r in rows if r["level"] == level])
        parquet.write_table(table, data / f"level_{level}-00000-of-00001.parquet")

    report = problems_import(path=tmp_path, levels=[1])

    assert sorted(report.created) == ["level1/1_Sound_linear", "level1/2_Centered_mean"]
    assert report.skipped == []
    assert Problem.objects.get(slug="level1/2_Centered_mean").source == problem_text(
        "near_zero_output"
    )


def test_the_command_imports_a_level_publishes_and_reports(tmp_path, capsys):
    folder = write_folder(tmp_path / "kb", {
        "level1/1_Good.py": problem_text("sound"),
        "level1/2_Bad.py": "class Model(:\n",
        "level2/1_Other.py": problem_text("sound"),
    })

    call_command("import_kernelbench", str(folder), "--level", "1", "--publish")

    out, err = capsys.readouterr()
    assert "1 problems: 1 new, 0 new versions, 0 unchanged, 1 published, 1 skipped" in out
    assert "skipped level1/2_Bad.py: syntax error on line 1" in err
    assert list(Problem.objects.values_list("slug", "status")) == [("level1/1_Good", "published")]


def test_the_command_refuses_a_path_that_holds_no_problems(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(CommandError, match="holds no KernelBench level folders"):
        call_command("import_kernelbench", str(tmp_path))
    with pytest.raises(CommandError, match="does not exist"):
        call_command("import_kernelbench", str(tmp_path / "missing"))
