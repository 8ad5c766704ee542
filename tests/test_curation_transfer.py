"""Curation travels as a JSON file: exported on the host that measured it, imported elsewhere."""

import copy
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluation.models import Hardware
from evaluation.services import HARDWARE_FIELDS
from gpu_runner.curation import validation_store
from gpu_runner.sharing import validated_peak_bytes
from problems.baselines import baseline_record
from problems.curation import (
    CurationFileError,
    curation_export,
    curation_import,
    validation_request,
)
from problems.models import Baseline, Problem, Validation
from problems.services import problem_upsert, problems_import
from tests.conftest import KERNELBENCH, REPO

pytestmark = pytest.mark.django_db

PROBLEMS = Path(__file__).resolve().parent / "problems"
RELU = "level1/901_Small_ReLU"
ADD = "level1/904_Small_Add"
GELU = "level2/901_Small_Linear_GELU"
MEASURED_AT = datetime(2025, 3, 1, 12, 30, tzinfo=UTC)


def validate(problem: Problem, hardware: Hardware, *, findings: tuple[str, ...] = ()) -> Validation:
    """A validation stored the runner's way, from a result as the harness reports it."""
    validation = validation_request(problem=problem, hardware=hardware, enqueue=False)
    validation.claim(runner_name="gpu-host:validate_problems:1", lease_seconds=60)
    result = {
        "mode": "validate",
        "status": "flagged" if findings else "passed",
        "findings": [{"code": code, "message": f"{code} explained"} for code in findings],
        "peak_memory_bytes": 3 * 2**20,
        "reference": {"median_ms": 0.125},
        "checks": {"constant_output": {"spread": 0.5}},
        "environment": {"torch": "2.9.0", "device": "cpu"},
        "evaluator_version": "7",
    }
    return validation_store(
        validation, result, seed=42, time_limit_s=60, runner_name="gpu-host:validate_problems:1"
    )


def measure(problem: Problem, hardware: Hardware, mode: str, median_ms: float) -> Baseline:
    baseline = baseline_record(
        problem=problem,
        hardware=hardware,
        mode=mode,
        stats={"median_ms": median_ms, "min_ms": median_ms * 0.9, "n": 30},
        torch_version=hardware.torch_version,
        problem_version=problem.current_version,
        environment={"device": "cpu", "host": "gpu-host"},
    )
    Baseline.objects.filter(pk=baseline.pk).update(created_at=MEASURED_AT)
    baseline.refresh_from_db()
    return baseline


VALIDATION_FIGURES = (
    "status",
    "findings",
    "peak_memory_bytes",
    "reference_ms",
    "details",
    "error",
    "environment",
    "finished_at",
)
BASELINE_FIGURES = ("median_ms", "stats", "torch_version", "environment", "created_at")


def figures(row, names: tuple[str, ...]) -> dict:
    return {name: getattr(row, name) for name in names}


def draft_problem() -> Problem:
    source = (PROBLEMS / "sound.py").read_text()
    return problem_upsert(level=4, number=1, name="Sound", source=source).problem


def to_a_fresh_site(hardware: Hardware, statuses: dict[Problem, str]) -> None:
    """What a site that never saw this hardware looks like: no hardware, so none of its
    validations or baselines, and the problems in the states they had before curation."""
    hardware.delete()
    for problem, status in statuses.items():
        Problem.objects.filter(pk=problem.pk).update(status=status)


def through_a_file(data: dict) -> dict:
    return json.loads(json.dumps(data))


def test_an_exported_curation_imports_into_a_fresh_site(cpu_hardware, sample_problems):
    relu, draft = sample_problems[RELU], draft_problem()
    flagged = validate(relu, cpu_hardware, findings=("constant_output",))
    passed = validate(draft, cpu_hardware)
    baselines = [
        measure(relu, cpu_hardware, "eager", 0.5),
        measure(relu, cpu_hardware, "compile", 0.25),
        measure(draft, cpu_hardware, "eager", 1.5),
    ]
    relu.refresh_from_db()
    draft.refresh_from_db()
    assert (relu.status, draft.status) == (Problem.Status.HELD, Problem.Status.VALIDATED)
    hardware_fields = figures(cpu_hardware, HARDWARE_FIELDS)
    data = through_a_file(curation_export(hardware=cpu_hardware))
    to_a_fresh_site(cpu_hardware, {relu: Problem.Status.PUBLISHED, draft: Problem.Status.DRAFT})

    report = curation_import(data=data)

    assert report.validations == [RELU, "level4/1_Sound"]
    assert report.baselines == [f"{RELU} compile", f"{RELU} eager", "level4/1_Sound eager"]
    assert report.skipped == []
    hardware = Hardware.objects.get(slug="cpu")
    assert figures(hardware, HARDWARE_FIELDS) == hardware_fields
    for before in (flagged, passed):
        after = Validation.objects.get(problem_version=before.problem_version, hardware=hardware)
        assert figures(after, VALIDATION_FIGURES) == figures(before, VALIDATION_FIGURES)
        assert (after.runner_name, after.requested_by) == ("", None)
    for before in baselines:
        after = Baseline.objects.get(problem=before.problem, hardware=hardware, mode=before.mode)
        assert figures(after, BASELINE_FIGURES) == figures(before, BASELINE_FIGURES)
        assert (after.source, after.problem_version) == ("measured", before.problem.current_version)
        assert after.created_at == MEASURED_AT
    # The states the runner gave them: findings hold a published problem, a pass validates
    # a draft.
    relu.refresh_from_db()
    draft.refresh_from_db()
    assert (relu.status, draft.status) == (Problem.Status.HELD, Problem.Status.VALIDATED)


def test_the_export_holds_the_latest_results_of_the_current_references_only(
    cpu_hardware, sample_problems
):
    relu, gelu, draft = sample_problems[RELU], sample_problems[GELU], draft_problem()
    validate(relu, cpu_hardware, findings=("constant_output",))
    latest = validate(relu, cpu_hardware)
    measure(relu, cpu_hardware, "eager", 0.5)
    baseline_record(  # KernelBench's published figure, not measured here
        problem=relu,
        hardware=cpu_hardware,
        mode="compile",
        stats={"median_ms": 0.3},
        torch_version="",
        source="imported",
    )
    measure(gelu, cpu_hardware, "compile", 2.0)
    validate(draft, cpu_hardware)
    measure(draft, cpu_hardware, "eager", 1.5)
    problem_upsert(  # a new reference: what was measured of the old one stays behind
        level=4, number=1, name="Sound", source=(PROBLEMS / "constant_output.py").read_text()
    )
    other = Hardware.objects.create(slug="h200", name="NVIDIA H200")
    validate(sample_problems[ADD], other)

    data = curation_export(hardware=cpu_hardware)

    assert (data["format"], data["version"]) == ("kbsite-curation", 1)
    assert datetime.fromisoformat(data["exported_at"])
    assert data["hardware"]["slug"] == "cpu" and data["hardware"]["kind"] == "cpu"
    assert None not in data["hardware"].values()
    assert [entry["slug"] for entry in data["problems"]] == [RELU, GELU]
    relu_entry, gelu_entry = data["problems"]
    assert relu_entry["level"] == 1
    assert relu_entry["source_hash"] == relu.current_version.source_hash
    assert relu_entry["validation"]["status"] == "passed"
    assert relu_entry["validation"]["finished_at"] == latest.finished_at.isoformat()
    assert relu_entry["baselines"] == [
        {
            "mode": "eager",
            "median_ms": 0.5,
            "stats": {"median_ms": 0.5, "min_ms": 0.45, "n": 30},
            "torch_version": cpu_hardware.torch_version,
            "environment": {"device": "cpu", "host": "gpu-host"},
            "created_at": MEASURED_AT.isoformat(),
        }
    ]
    assert gelu_entry["validation"] is None
    assert [b["mode"] for b in gelu_entry["baselines"]] == ["compile"]
    level2 = curation_export(hardware=cpu_hardware, levels=[2])
    assert [entry["slug"] for entry in level2["problems"]] == [GELU]


def test_a_problem_whose_reference_changed_is_skipped_with_the_reason(
    cpu_hardware, sample_problems
):
    relu, gelu = sample_problems[RELU], sample_problems[GELU]
    validate(relu, cpu_hardware)
    measure(relu, cpu_hardware, "eager", 0.5)
    validate(gelu, cpu_hardware)
    data = through_a_file(curation_export(hardware=cpu_hardware))
    data["problems"].append({**data["problems"][0], "slug": "level9/1_Gone"})
    Problem.objects.create(slug="level9/2_Empty", level=9, number=2, name="Empty")
    data["problems"].append({**data["problems"][0], "slug": "level9/2_Empty"})
    to_a_fresh_site(cpu_hardware, {})
    problem_upsert(level=1, number=901, name="Small_ReLU", source=relu.source + "\n# changed\n")

    report = curation_import(data=data)

    assert report.validations == [GELU]
    assert report.baselines == []
    assert report.skipped == [
        (RELU, "the site's reference differs from the one measured"),
        ("level9/1_Gone", "no such problem on this site"),
        ("level9/2_Empty", "the problem has no reference on this site"),
    ]
    assert not Validation.objects.filter(problem_version__problem=relu).exists()
    assert not Baseline.objects.exists()


def test_importing_twice_stores_nothing_new_the_second_time(cpu_hardware, sample_problems):
    relu = sample_problems[RELU]
    validate(relu, cpu_hardware)
    measure(relu, cpu_hardware, "eager", 0.5)
    measure(relu, cpu_hardware, "compile", 0.25)
    data = through_a_file(curation_export(hardware=cpu_hardware))
    to_a_fresh_site(cpu_hardware, {})
    curation_import(data=data)

    again = curation_import(data=data)

    assert (again.validations, again.baselines) == ([], [])
    assert again.skipped == [
        (RELU, "validation: this site already has a finished validation of this reference on cpu"),
        (RELU, "compile baseline: this site has this figure or a more recent one"),
        (RELU, "eager baseline: this site has this figure or a more recent one"),
    ]
    assert Validation.objects.count() == 1
    assert sorted(Baseline.objects.values_list("mode", flat=True)) == ["compile", "eager"]

    # Measured again here since: the older file does not bring the older figure back.
    hardware = Hardware.objects.get(slug="cpu")
    baseline_record(
        problem=relu,
        hardware=hardware,
        mode="eager",
        stats={"median_ms": 0.4},
        torch_version=hardware.torch_version,
    )
    curation_import(data=data)
    assert Baseline.objects.get(mode="eager").median_ms == 0.4


def malformed(data: dict, change) -> dict:
    data = copy.deepcopy(data)
    change(data)
    return data


def last_entry(data: dict) -> dict:
    return data["problems"][-1]


MALFORMED = [
    (lambda d: d.update(format="kernelbench"), "not a curation file"),
    (lambda d: d.update(version=2), "curation file version 2: this site reads version 1"),
    (lambda d: d.update(version=True), "curation file version True"),
    (lambda d: d.update(hardware="cpu"), "hardware: expected an object"),
    (lambda d: d["hardware"].update(slug="CPU box"), "hardware.slug: 'CPU box' is not"),
    (lambda d: d["hardware"].update(kind="tpu"), "hardware.kind: expected one of cpu, gpu"),
    (lambda d: d.update(problems={}), "problems: expected a list"),
    (lambda d: d["problems"].append("level1/1"), r"problems\[2\]: expected an object"),
    (lambda d: d["problems"].append(d["problems"][0]), "given more than once: level1/901"),
    (lambda d: last_entry(d).pop("source_hash"), r"\(level2/901_Small_Linear_GELU\): 'source_"),
    (
        lambda d: last_entry(d)["baselines"][0].update(median_ms="fast"),
        r"baselines\[0\]\.median_ms: expected a finite number, not 'fast'",
    ),
    (lambda d: last_entry(d)["baselines"][0].update(mode="max-autotune"), "not eager or compile"),
    (lambda d: last_entry(d)["baselines"][0]["stats"].update(median_ms=9), "differs from stats"),
    (lambda d: last_entry(d)["validation"].update(status="running"), "not a finished status"),
    (
        lambda d: last_entry(d)["validation"].update(findings=[{"code": "x", "message": "y"}]),
        "a passed validation with 1 findings",
    ),
    (lambda d: last_entry(d)["validation"].update(findings=["x"]), r"findings\[0\]: expected"),
    (lambda d: last_entry(d)["validation"].update(finished_at="yesterday"), "ISO 8601"),
    (lambda d: last_entry(d)["validation"].update(details=[]), "details: expected an object"),
]


@pytest.mark.parametrize("change, message", MALFORMED)
def test_a_malformed_file_stores_nothing_and_says_what_is_wrong(
    cpu_hardware, sample_problems, change, message
):
    for slug in (RELU, GELU):
        validate(sample_problems[slug], cpu_hardware)
        measure(sample_problems[slug], cpu_hardware, "eager", 0.5)
    data = through_a_file(curation_export(hardware=cpu_hardware))
    to_a_fresh_site(cpu_hardware, {})

    with pytest.raises(CurationFileError, match=message):
        curation_import(data=malformed(data, change))

    assert not Hardware.objects.filter(slug="cpu").exists()
    assert not Validation.objects.exists() and not Baseline.objects.exists()


def test_the_commands_write_and_read_the_file(cpu_hardware, sample_problems, tmp_path, capsys):
    relu, gelu = sample_problems[RELU], sample_problems[GELU]
    validate(relu, cpu_hardware)
    measure(relu, cpu_hardware, "eager", 0.5)
    measure(relu, cpu_hardware, "compile", 0.25)
    validate(gelu, cpu_hardware)

    call_command("curation_export", "--hardware", "cpu")
    text = capsys.readouterr().out
    data = json.loads(text)
    assert [entry["slug"] for entry in data["problems"]] == [RELU, GELU]
    assert text.rstrip("\n") == json.dumps(data, indent=1, sort_keys=True)

    path = tmp_path / "curation-h200.json"
    call_command("curation_export", "--hardware", "cpu", "--level", "1", "--output", str(path))
    assert f"wrote 1 problems (1 validations, 2 baselines) on cpu to {path}" in (
        capsys.readouterr().out
    )
    assert [entry["slug"] for entry in json.loads(path.read_text())["problems"]] == [RELU]
    with pytest.raises(CommandError, match="no hardware 'h100'"):
        call_command("curation_export", "--hardware", "h100")
    to_a_fresh_site(cpu_hardware, {})

    call_command("curation_import", str(path))
    assert capsys.readouterr().out == "stored 1 validations, 2 baselines; skipped 0\n"
    call_command("curation_import", str(path))
    assert capsys.readouterr().out.splitlines() == [
        "stored 0 validations, 0 baselines; skipped 3:",
        f"- {RELU}: validation: this site already has a finished validation of this "
        "reference on cpu",
        f"- {RELU}: compile baseline: this site has this figure or a more recent one",
        f"- {RELU}: eager baseline: this site has this figure or a more recent one",
    ]

    path.write_text(path.read_text()[:200])
    with pytest.raises(CommandError, match="curation-h200.json: not a readable JSON file"):
        call_command("curation_import", str(path))
    with pytest.raises(CommandError, match="not a readable JSON file"):
        call_command("curation_import", str(tmp_path / "missing.json"))
    path.write_text(json.dumps({"format": "kbsite-curation", "version": 1, "problems": []}))
    with pytest.raises(CommandError, match="curation-h200.json: hardware: expected an object"):
        call_command("curation_import", str(path))


def test_resuming_with_missing_only_skips_what_was_imported(
    cpu_hardware, sample_problems, tmp_path, capsys
):
    relu, add = sample_problems[RELU], sample_problems[ADD]
    validate(relu, cpu_hardware)
    measure(relu, cpu_hardware, "eager", 0.5)
    measure(relu, cpu_hardware, "compile", 0.25)
    path = tmp_path / "curation.json"
    call_command("curation_export", "--hardware", "cpu", "--output", str(path))
    to_a_fresh_site(cpu_hardware, {})
    call_command("curation_import", str(path))
    capsys.readouterr()

    resume = ["--hardware", "cpu", "--problem", RELU, "--missing-only"]
    call_command("validate_problems", *resume, "--problem", ADD)
    assert "queued 1 validations on cpu" in capsys.readouterr().out
    queued = Validation.objects.get(status=Validation.Status.QUEUED)
    assert queued.problem_version == add.current_version

    # The imported figures were measured with this host's torch: nothing is left to measure.
    call_command("baselines", *resume)
    assert "nothing to measure" in capsys.readouterr().out
    assert Baseline.objects.filter(problem=relu).count() == 2


def committed_h200_curation() -> dict:
    """data/curation/h200.json, what our H200 runs measured."""
    return json.loads((REPO / "data/curation/h200.json").read_text(encoding="utf-8"))


def test_the_committed_h200_curation_is_a_file_a_site_reads():
    """data/curation/h200.json, what our H200 runs measured: well-formed, so a site (here one
    without those problems, which skips each by name) and the curation script can import it."""
    data = committed_h200_curation()
    report = curation_import(data=data)
    assert data["hardware"]["slug"] == "h200" and len(data["problems"]) >= 50
    assert report.validations == [] and report.baselines == []
    assert {why for _, why in report.skipped} == {"no such problem on this site"}
    assert Hardware.objects.filter(slug="h200", name="NVIDIA H200").exists()


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="shared/kernelbench is not beside the repo")
@pytest.mark.budget(5)  # reason: imports KernelBench's 250 real problems and 350 curation rows
def test_the_committed_h200_curation_covers_every_problem_of_kernelbench_levels_1_to_3():
    """Issues 21 and 41: levels 1 to 3 validated on the H200, level 3 with baselines too. Against
    the real problem set, every one of the 250 references is the one measured, so each gets its
    validation (with the device memory it peaked at, which admission reads), and each level 3
    problem both baselines."""
    problems_import(path=KERNELBENCH, levels=[1, 2, 3])
    report = curation_import(data=committed_h200_curation())
    curated = Problem.objects.filter(level__in=[1, 2, 3])
    assert curated.count() == 250 and report.skipped == []
    assert sorted(report.validations) == sorted(curated.values_list("slug", flat=True))
    h200 = Hardware.objects.get(slug="h200")
    validations = Validation.objects.filter(hardware=h200)
    # Admission on a shared GPU reads each problem's validated peak, not a guess.
    big = Problem.objects.get(slug="level1/20_LeakyReLU").current_version
    assert validated_peak_bytes(big, h200) > 6 * 2**30
    assert all(validated_peak_bytes(p.current_version, h200) for p in curated)
    for mode in ("eager", "compile"):
        measured = Baseline.objects.filter(hardware=h200, mode=mode, source="measured")
        assert set(measured.values_list("problem__level", flat=True)) == {3}
        assert measured.count() == 50
    flagged = validations.filter(status="flagged")
    levels = Counter(flagged.values_list("problem_version__problem__level", flat=True))
    assert levels == {1: 8, 2: 9, 3: 19}
