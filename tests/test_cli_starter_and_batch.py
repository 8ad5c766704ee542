"""`kb starter` (the site's starter kernel) and `kb submit FOLDER` (every kernel file in a
folder through the batch API, each file's problem told by its name)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.backends import NAMES
from gpu_runner.services import evaluate_submission
from kbcli import batch
from kbcli.client import ApiError
from submissions.models import Submission
from tests.api_support import token_for
from tests.conftest import REPO, kernel_source
from tests.test_cli import kb

RELU = kernel_source("relu_correct.py")


# ---- the file names, in this process ------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("level_1_problem_19_sample_0_kernel.py", {"level": 1, "number": 19}),
        ("run/level_3_problem_7_sample_12_kernel.py", {"level": 3, "number": 7}),
        ("level1/19_ReLU.py", {"level": 1, "number": 19}),
        ("kernels/level2/5_Conv2d_Subtract_Tanh.py", {"level": 2, "number": 5}),
        ("level1_19_ReLU.py", {"level": 1, "number": 19}),
        ("level1_19_ReLU_cuda.py", {"level": 1, "number": 19}),  # as `kb starter -o` names it
        ("level4/12.py", {"level": 4, "number": 12}),
    ],
)
def test_a_file_name_tells_its_problems_level_and_number(path, problem):
    assert batch.problem_for(Path(path)) == problem


@pytest.mark.parametrize(
    "path",
    ["relu.py", "19_ReLU.py", "level1/ReLU.py", "level_1_problem_19_kernel.py",
     "level1_19_ReLU.txt", "mylevel1_19_ReLU.py", "level1/sub/19_ReLU.py"],
)
def test_a_file_name_that_does_not_tell_its_problem_maps_to_none(path):
    assert batch.problem_for(Path(path)) is None


def test_the_plan_sends_every_kernel_file_once_and_names_those_it_cannot_send(tmp_path):
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "19_ReLU.py").write_text(RELU)
    (tmp_path / "level_1_problem_20_sample_0_kernel.py").write_text(RELU)
    (tmp_path / "notes.py").write_text("# not a kernel")
    (tmp_path / "level1_21_X.py").write_bytes(b"\xff not text")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "level1_19_ReLU.py").write_text(RELU)
    (tmp_path / "README.md").write_text("not python")
    items, refused = batch.plan(tmp_path, None, {"backend": "cuda"})
    assert [(item.name, item.fields["level"], item.fields["number"]) for item in items] == [
        ("level1/19_ReLU.py", 1, 19), ("level_1_problem_20_sample_0_kernel.py", 1, 20)]
    assert all(item.fields["backend"] == "cuda" and item.fields["source"] == RELU
               and item.fields["filename"] == item.name for item in items)
    assert [name for name, _ in refused] == ["level1_21_X.py", "notes.py"]
    assert "UTF-8" in refused[0][1] and "cannot tell its problem" in refused[1][1]


def test_problem_for_all_names_every_file_whatever_its_name(tmp_path):
    (tmp_path / "notes.py").write_text(RELU)
    (tmp_path / "level1_19_ReLU.py").write_text(RELU)
    items, refused = batch.plan(tmp_path, {"problem": "level1/901_Small_ReLU"}, {})
    assert refused == []
    assert [item.fields["problem"] for item in items] == ["level1/901_Small_ReLU"] * 2
    assert all("level" not in item.fields for item in items)


class StubClient:
    """The batch API as the site answers it: all or none, refused items named by index."""

    def __init__(self, refuse: dict[int, str] | None = None, whole: ApiError | None = None):
        self.refuse = refuse or {}  # item source -> why the site refuses it
        self.whole = whole
        self.requests: list[list[str]] = []
        self.next_id = 1

    def submit_batch(self, items: list[dict]) -> list[dict]:
        self.requests.append([item["source"] for item in items])
        if self.whole:
            raise self.whole
        errors = [{"index": i, "detail": self.refuse[item["source"]], "code": "x"}
                  for i, item in enumerate(items) if item["source"] in self.refuse]
        if errors:
            raise ApiError(400, {"detail": "invalid", "code": "invalid_batch", "errors": errors})
        records = [{"id": self.next_id + i, "page_url": f"/s/{self.next_id + i}/"}
                   for i in range(len(items))]
        self.next_id += len(items)
        return records


def items(*sources: str) -> list[batch.Item]:
    return [batch.Item(f"{source}.py", {"source": source}) for source in sources]


def test_items_the_site_refuses_are_set_aside_and_the_rest_sent_again():
    client = StubClient(refuse={"b": "not valid Python", "d": "no problem"})
    accepted, refused = batch.submit_all(client, items("a", "b", "c", "d"))
    assert client.requests == [["a", "b", "c", "d"], ["a", "c"]]
    assert [(item.name, record["id"]) for item, record in accepted] == [("a.py", 1), ("c.py", 2)]
    assert refused == [("b.py", "not valid Python"), ("d.py", "no problem")]


def test_a_whole_batch_refused_names_every_file_with_the_reason():
    client = StubClient(whole=ApiError(401, {"detail": "Invalid token."}))
    accepted, refused = batch.submit_all(client, items("a", "b"))
    assert accepted == [] and client.requests == [["a", "b"]]
    assert refused == [("a.py", "Invalid token. (HTTP 401)"), ("b.py", "Invalid token. (HTTP 401)")]


def test_more_files_than_a_batch_holds_go_in_several_requests():
    client = StubClient()
    accepted, refused = batch.submit_all(client, items(*[str(i) for i in range(205)]))
    assert [len(sent) for sent in client.requests] == [100, 100, 5]
    assert [record["id"] for _, record in accepted] == list(range(1, 206)) and refused == []


# ---- the real kb against the real server --------------------------------------------------------


def login(tmp_path: Path, live_site: str, user) -> Path:
    home = tmp_path / "home"
    result = kb("login", "--url", live_site, "--token", token_for(user), home=home)
    assert result.returncode == 0, result.stderr
    return home


@pytest.mark.django_db(transaction=True)
def test_kb_starter_prints_writes_and_keeps_an_edited_file_and_its_file_maps_back_to_the_problem(
    tmp_path, live_site, user, relu_problem, cpu_hardware
):
    """Slow: the real kb command, a process of its own, against the real server's starter
    API and batch API."""
    home = login(tmp_path, live_site, user)
    printed = kb("starter", "--problem", relu_problem.slug, "--backend", "torch", home=home)
    assert printed.returncode == 0, printed.stderr
    assert "class ModelNew" in printed.stdout

    folder = tmp_path / "kernels"
    folder.mkdir()
    written = kb("starter", "--problem", relu_problem.slug, "--backend", "torch", "-o",
                 str(folder), home=home)
    assert written.returncode == 0, written.stderr
    path = folder / "level1_901_Small_ReLU_torch.py"
    assert path.read_text() == printed.stdout
    path.write_text(RELU)  # the user's edit, which a second starter must not overwrite
    again = kb("starter", "--problem", relu_problem.slug, "--backend", "torch", "-o", str(path),
               home=home)
    assert again.returncode == 2 and "--force" in again.stderr
    assert path.read_text() == RELU

    unknown = kb("starter", "--problem", relu_problem.slug, "--backend", "fortran", home=home)
    assert unknown.returncode == 1 and f"allowed: {', '.join(NAMES)}" in unknown.stderr

    submitted = kb("submit", str(folder), "--backend", "torch", home=home)
    assert submitted.returncode == 0, submitted.stderr
    stored = Submission.objects.get()
    assert (stored.problem_id, stored.filename) == (relu_problem.pk, path.name)


@pytest.mark.django_db(transaction=True)
def test_kb_submit_dir_submits_every_kernel_file_once_and_names_the_files_it_could_not_map(
    tmp_path, live_site, user, sample_problems, cpu_hardware
):
    """Slow: the real kb command against the real server: one batch request, the site's
    all-or-none refusal of some files answered by sending the others again, nothing lost and
    nothing stored twice."""
    home = login(tmp_path, live_site, user)
    folder = tmp_path / "generations"
    (folder / "level1").mkdir(parents=True)
    (folder / "level_1_problem_901_sample_0_kernel.py").write_text(RELU)
    (folder / "level_1_problem_901_sample_1_kernel.py").write_text(RELU)
    (folder / "level1" / "904_Small_Add.py").write_text(RELU)
    (folder / "level1_902_Small_Matmul_torch.py").write_text(RELU)
    (folder / "notes.py").write_text("# what I tried\n")
    (folder / "level_1_problem_999_sample_0_kernel.py").write_text(RELU)  # no such problem
    (folder / "level1" / "903_Small_Softmax.py").write_text("class ModelNew(:\n")

    result = kb("submit", str(folder), "--backend", "torch", home=home)
    assert result.returncode == 1, result.stderr
    stored = {s.filename: s for s in Submission.objects.select_related("problem")}
    assert {name: s.problem.number for name, s in stored.items()} == {
        "level_1_problem_901_sample_0_kernel.py": 901,
        "level_1_problem_901_sample_1_kernel.py": 901,
        "level1/904_Small_Add.py": 904,
        "level1_902_Small_Matmul_torch.py": 902,
    }
    lines = result.stdout.splitlines()
    assert sorted(lines) == sorted(
        f"Submitted {name} as submission {s.pk}: {live_site}{s.get_absolute_url()}"
        for name, s in stored.items())
    errors = result.stderr
    assert "kb: notes.py: cannot tell its problem" in errors
    assert ("kb: level_1_problem_999_sample_0_kernel.py: There is no problem 999 in level 1. "
            "Allowed: 1/901") in errors
    assert "kb: level1/903_Small_Softmax.py: The source is not valid Python" in errors
    assert "(line 1, column 16)" in errors
    assert "submitted 4 of 7 kernel files" in errors

    as_json = kb("submit", str(folder / "level1"), "--backend", "torch", "--json", home=home)
    body = json.loads(as_json.stdout)
    assert [row["file"] for row in body["submitted"]] == ["904_Small_Add.py"]
    assert [row["file"] for row in body["refused"]] == ["903_Small_Softmax.py"]
    assert Submission.objects.count() == 5


@pytest.mark.django_db(transaction=True)
def test_kb_submit_dir_wait_follows_every_submission_to_its_verdict(
    tmp_path, live_site, user, relu_problem, cpu_hardware, harness, settings
):
    """Slow: the real kb follows each submission on the real server's event stream while
    they are evaluated (the runner's services here, with a stand-in harness)."""
    settings.REVERIFY_NEW_RECORDS = False  # the verdict settles it: no re-verification to wait
    home = login(tmp_path, live_site, user)
    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "a.py").write_text(RELU)
    (folder / "b.py").write_text(RELU)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update({"XDG_CONFIG_HOME": str(home), "PYTHONUNBUFFERED": "1"})
    waiting = subprocess.Popen(
        [sys.executable, "-m", "kbcli", "submit", str(folder), "--problem", relu_problem.slug,
         "--backend", "torch", "--wait", "--timeout", "60"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        submitted = [waiting.stdout.readline(), waiting.stdout.readline()]
        assert all(line.startswith("Submitted") for line in submitted), submitted
        harness.will_return(verdict="correct")
        harness.will_return(verdict="incorrect")
        for submission in Submission.objects.order_by("filename"):
            evaluate_submission(submission_id=submission.pk, runner_name="r1")
        out, err = waiting.communicate(timeout=60)
    finally:
        waiting.kill()
    assert waiting.returncode == 1, err  # one of them is not correct
    ids = dict(Submission.objects.values_list("filename", "pk"))
    assert f"a.py: submission {ids['a.py']}: finished: correct" in out
    assert f"b.py: submission {ids['b.py']}: finished: incorrect" in out
