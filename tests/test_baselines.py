"""Baselines: measured on this host through the sandbox, and KernelBench's JSON in and out."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluation.models import Hardware
from gpu_runner.curation import BaselineOutcome, baselines_compile_ahead
from problems.models import Baseline
from problems.services import problem_upsert
from tests.conftest import KERNELBENCH

pytestmark = pytest.mark.django_db

PROBLEMS = Path(__file__).resolve().parent / "problems"
H100 = KERNELBENCH / "baselines" / "H100_Modal"


def test_the_command_times_a_published_reference_eager_and_compiled(
    cpu_hardware, sample_problems, capsys
):
    call_command("baselines", "--hardware", "cpu", "--problem", "level1/901_Small_ReLU")

    rows = {b.mode: b for b in Baseline.objects.filter(hardware=cpu_hardware)}
    assert set(rows) == {"eager", "compile"}
    relu = sample_problems["level1/901_Small_ReLU"]
    for baseline in rows.values():
        assert baseline.problem == relu
        assert baseline.problem_version == relu.current_version
        assert baseline.median_ms > 0
        assert baseline.stats["median_ms"] == baseline.median_ms
        assert baseline.stats["n"] >= 1 and baseline.stats["min_ms"] <= baseline.median_ms
        assert baseline.torch_version == torch.__version__
        assert baseline.source == "measured"
        assert baseline.environment["device"] == "cpu"
    assert rows["compile"].stats["compile_s"] > 0
    out = capsys.readouterr().out
    assert "level1/901_Small_ReLU: eager" in out and "compiled in" in out
    assert "measured 1 problems on cpu" in out

    # Resuming a long run measures only what is missing.
    call_command(
        "baselines", "--hardware", "cpu", "--problem", "level1/901_Small_ReLU", "--missing-only"
    )
    assert "nothing to measure" in capsys.readouterr().out


@pytest.fixture
def stood_in(monkeypatch) -> list[tuple]:
    """The compiling ahead and the timing stood in for, for the command's own logic (which modes,
    which rounds): each call recorded as (what, problem slugs, workers or modes), and each
    problem measured reported as the real pass reports it. The real ones run in
    test_the_command_times_a_published_reference_eager_and_compiled and
    test_compiling_ahead_builds_the_graphs_into_the_cache_and_times_nothing (each sandboxed
    torch.compile on a CPU takes 15 to 20 s)."""
    calls: list[tuple] = []

    def compile_ahead(*, hardware, problems, workers, time_limit_s=None):
        calls.append(("compile ahead", [p.slug for p in problems], workers))
        return {}

    def measure(*, hardware, problems, modes, time_limit_s, batch_size, on_outcome):
        calls.append(("measure", [p.slug for p in problems], list(modes)))
        row = SimpleNamespace(stats={"median_ms": 1.0, "compile_s": 2.0})
        for problem in problems:
            on_outcome(BaselineOutcome(problem=problem, stored=dict.fromkeys(modes, row)))

    monkeypatch.setattr("gpu_runner.curation.baselines_compile_ahead", compile_ahead)
    monkeypatch.setattr("gpu_runner.curation.baselines_measure", measure)
    return calls


def test_resuming_measures_only_the_modes_a_problem_lacks(
    cpu_hardware, sample_problems, stood_in, capsys
):
    relu = sample_problems["level1/901_Small_ReLU"]
    eager = Baseline.objects.create(
        problem=relu, problem_version=relu.current_version, hardware=cpu_hardware, mode="eager",
        median_ms=3.0, stats={"median_ms": 3.0}, torch_version=torch.__version__,
    )

    call_command("baselines", "--hardware", "cpu", "--problem", relu.slug, "--missing-only")

    assert stood_in == [("measure", [relu.slug], ["compile"])]
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("level1/901"))
    assert "compile" in line and "eager" not in line, line

    # One measured under another torch does not count: it is measured again.
    Baseline.objects.filter(pk=eager.pk).update(torch_version="1.0.0")
    call_command("baselines", "--hardware", "cpu", "--problem", relu.slug, "--missing-only",
                 "--modes", "eager")
    assert stood_in[1:] == [("measure", [relu.slug], ["eager"])]


def test_compiling_ahead_builds_the_graphs_into_the_cache_and_times_nothing(
    cpu_hardware, sample_problems, settings, tmp_path
):
    # Real sandboxed processes, two at a time: only they show the graphs landing in the cache.
    settings.BUILD_CACHE_DIR = tmp_path / "builds"
    relu = sample_problems["level1/901_Small_ReLU"]
    add = sample_problems["level1/904_Small_Add"]

    failed = baselines_compile_ahead(hardware=cpu_hardware, problems=[relu, add], workers=2)

    assert failed == {}
    assert any((tmp_path / "builds" / "inductor").rglob("*.py")), "compiled graphs in the cache"
    assert not Baseline.objects.exists(), "nothing timed, nothing stored"


def test_the_command_compiles_ahead_in_rounds_and_measures_each_round_before_the_next(
    cpu_hardware, sample_problems, stood_in, capsys
):
    # Taken in the problems' order (level, then number): 903 before 904.
    relu, softmax, add = ("level1/901_Small_ReLU", "level1/903_Small_Softmax",
                          "level1/904_Small_Add")

    # One at a time, in rounds of two: the first round's baselines are stored (and printed)
    # before the second round compiles, so a run cut short keeps what it finished.
    call_command("baselines", "--hardware", "cpu", "--problem", relu, "--problem", add,
                 "--problem", softmax, "--modes", "compile", "--compile-ahead", "1")

    assert stood_in == [("compile ahead", [relu, softmax], 1),
                        ("measure", [relu, softmax], ["compile"]),
                        ("compile ahead", [add], 1), ("measure", [add], ["compile"])]
    lines = capsys.readouterr().out.splitlines()
    printed = [line[:19] if line.startswith("compiled ahead:") else line.split(":")[0]
               for line in lines if line.startswith(("compiled ahead:", "level1/"))]
    assert printed == ["compiled ahead: 2/2", relu, softmax, "compiled ahead: 1/1", add]


def test_only_published_problems_are_measured_unless_asked(cpu_hardware, sample_problems):
    draft = problem_upsert(
        level=2, number=950, name="Draft", source=(PROBLEMS / "sound.py").read_text()
    ).problem

    call_command("baselines", "--hardware", "cpu", "--level", "2", "--modes", "eager")

    measured = set(Baseline.objects.values_list("problem__slug", "mode"))
    assert measured == {("level2/901_Small_Linear_GELU", "eager")}

    first = Baseline.objects.get(mode="eager").created_at

    # Both level 2 problems share one sandboxed process (a batch).
    call_command(
        "baselines", "--hardware", "cpu", "--level", "2", "--modes", "eager",
        "--include-unpublished", "--batch", "5",
    )
    assert Baseline.objects.get(problem=draft, mode="eager").median_ms > 0
    assert Baseline.objects.get(problem__slug="level2/901_Small_Linear_GELU").created_at > first


def test_measuring_a_gpu_hardware_on_a_host_without_it_is_refused(db, sample_problems):
    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    Hardware.objects.create(slug="h200", name="NVIDIA H200", kind=Hardware.Kind.GPU)
    with pytest.raises(CommandError, match="run this on a h200 host"):
        call_command("baselines", "--hardware", "h200")
    assert not Baseline.objects.exists()


def write_kernelbench_json(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"std": 0.01, "min": 1.2, "max": 1.4, "num_trials": 100,
             "hardware": "NVIDIA H100 80GB HBM3", "device": "cuda:0"}
    eager = {
        "level1": {
            "901_Small_ReLU.py": {"mean": 1.25, **entry},
            "902_Other_name.py": {"mean": 2.0, **entry},
            "999_Missing.py": {"mean": 2.0, **entry},
        },
        "level2": {"901_Small_Linear_GELU.py": {"mean": 4.5, **entry}},
    }
    compiled = {"level1": {"901_Small_ReLU.py": {"mean": 0.75, **entry},
                           "903_Small_Softmax.py": {"mean": "fast", **entry}}}
    (folder / "baseline_time_torch.json").write_text(json.dumps(eager))
    (folder / "baseline_time_torch_compile_inductor_default.json").write_text(json.dumps(compiled))


def test_kernelbench_baseline_files_import_and_mismatches_are_reported(
    sample_problems, tmp_path, capsys
):
    write_kernelbench_json(tmp_path / "H100")

    call_command(
        "baselines", "--hardware", "h100", "--import", str(tmp_path / "H100"),
        "--torch-version", "2.9.0",
    )

    h100 = Hardware.objects.get(slug="h100")
    assert (h100.name, h100.kind) == ("NVIDIA H100 80GB HBM3", "gpu")
    stored = {
        (b.problem.slug, b.mode): b for b in Baseline.objects.filter(hardware=h100)
    }
    assert set(stored) == {
        ("level1/901_Small_ReLU", "eager"),
        ("level2/901_Small_Linear_GELU", "eager"),
        ("level1/901_Small_ReLU", "compile"),
    }
    relu = stored[("level1/901_Small_ReLU", "eager")]
    assert relu.median_ms == 1.25
    assert relu.stats == {"median_ms": 1.25, "mean_ms": 1.25, "std_ms": 0.01, "min_ms": 1.2,
                          "max_ms": 1.4, "n": 100, "statistic": "mean"}
    assert (relu.source, relu.torch_version) == ("imported", "2.9.0")
    assert stored[("level1/901_Small_ReLU", "compile")].median_ms == 0.75
    captured = capsys.readouterr()
    assert "imported 3 baselines on h100, skipped 3" in captured.out
    assert "902_Other_name.py: this site's problem 902 is Small_Matmul, not Other_name" in (
        captured.err
    )
    assert "999_Missing.py: no such problem here" in captured.err
    assert "903_Small_Softmax.py: no usable mean" in captured.err


def test_exported_baselines_are_in_kernelbench_format_and_import_back(
    sample_problems, tmp_path
):
    write_kernelbench_json(tmp_path / "in")
    call_command("baselines", "--hardware", "h100", "--import", str(tmp_path / "in"))

    call_command("baselines", "--hardware", "h100", "--export", str(tmp_path / "out"))

    eager = json.loads((tmp_path / "out" / "baseline_time_torch.json").read_text())
    assert eager == {
        "level1": {"901_Small_ReLU.py": {
            "mean": 1.25, "std": 0.01, "min": 1.2, "max": 1.4, "num_trials": 100,
            "hardware": "NVIDIA H100 80GB HBM3", "device": "cuda:0",
        }},
        "level2": {"901_Small_Linear_GELU.py": {
            "mean": 4.5, "std": 0.01, "min": 1.2, "max": 1.4, "num_trials": 100,
            "hardware": "NVIDIA H100 80GB HBM3", "device": "cuda:0",
        }},
    }
    compiled = tmp_path / "out" / "baseline_time_torch_compile_inductor_default.json"
    assert list(json.loads(compiled.read_text())["level1"]) == ["901_Small_ReLU.py"]

    call_command("baselines", "--hardware", "h100-copy", "--import", str(tmp_path / "out"))
    copied = {
        (b.problem.slug, b.mode): b.median_ms
        for b in Baseline.objects.filter(hardware__slug="h100-copy")
    }
    assert copied == {
        ("level1/901_Small_ReLU", "eager"): 1.25,
        ("level2/901_Small_Linear_GELU", "eager"): 4.5,
        ("level1/901_Small_ReLU", "compile"): 0.75,
    }


def test_a_file_that_is_not_kernelbench_baseline_json_is_refused(sample_problems, tmp_path):
    bad = tmp_path / "baseline_time_torch.json"
    bad.write_text("{not json")
    with pytest.raises(CommandError, match="not a readable JSON file"):
        call_command("baselines", "--hardware", "h100", "--import", str(bad))
    bad.write_text(json.dumps({"results": []}))
    with pytest.raises(CommandError, match='expected {"level1"'):
        call_command("baselines", "--hardware", "h100", "--import", str(bad))
    assert not Hardware.objects.filter(slug="h100").exists()


@pytest.mark.skipif(not H100.is_dir(), reason="shared/kernelbench is not beside the repo")
def test_the_published_h100_baselines_import_for_the_imported_problems():
    call_command("import_kernelbench", str(H100.parent.parent), "--level", "1")

    call_command(
        "baselines", "--hardware", "h100", "--import", str(H100), "--torch-version", "2.9.0"
    )

    assert Baseline.objects.filter(hardware__slug="h100", mode="eager").count() == 100
    assert Baseline.objects.filter(hardware__slug="h100", mode="compile").count() == 100
    matmul = Baseline.objects.get(
        hardware__slug="h100", mode="eager", problem__slug="level1/1_Square_matrix_multiplication_"
    )
    assert matmul.median_ms == 2.66
