"""Visibility is one rule (submissions.selectors.can_see_source): a kernel's source and every field
derived from it (error text, compiler output, traceback, logs, the static report's kernel and
helper names, the profile's kernel names, the diagnosis, the source's hash, Nsight Compute
reports) go to whoever may see the source, in the API, the pages, the live events and the
exports; the seeds to the owner and staff. Tried for a public problem, a private one, a
competition's hidden code before and after its end, and a draft's, as the anonymous visitor,
another user, the owner and staff."""

import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.test import Client
from django.utils import timezone

from evaluation.services import hardware_register
from problems.models import Problem, source_hash
from submissions import events
from submissions.models import Evaluation, NcuReport, Submission
from submissions.selectors import can_see_source, submission_status_payload
from tests.api_support import token_for
from tests.leaderboard_factory import make_problem

pytestmark = pytest.mark.django_db

SECRET = "alice_secret_fused_add_kernel_QX9"
HELPER = "softmax_fwd"
SOURCE = (
    "import torch\n\n\n"
    f"def {HELPER}(x):\n    return x\n\n\n"
    f"# {SECRET}\nclass ModelNew(torch.nn.Module):\n    pass\n"
)
VIEWERS = ("anonymous", "stranger", "owner", "staff")


@pytest.fixture
def people(db):
    make = get_user_model().objects.create_user  # no passwords: hashing one takes a while
    return {
        "anonymous": None,
        "stranger": make(username="eve"),
        "owner": make(username="alice"),
        "staff": make(username="root", is_staff=True),
    }


@pytest.fixture
def gpu(db):
    return hardware_register(slug="h200", name="NVIDIA H200", kind="gpu")


def stored(*, problem, hardware, owner, hidden_until=None) -> Submission:
    """A finished submission whose evaluation carries the secret in every derived field."""
    submission = Submission.objects.create(
        user=owner, problem=problem, problem_version=problem.current_version,
        hardware=hardware, backend="cuda", source=SOURCE, source_hash=source_hash(SOURCE),
        status=Submission.Status.FINISHED, verdict="incorrect", code_hidden_until=hidden_until,
    )
    kernel = {"name": SECRET, "own": True, "calls": 1, "device_us": 5.0, "share": 1.0}
    Evaluation.objects.create(
        submission=submission, hardware=hardware, problem_version=submission.problem_version,
        source_hash=submission.source_hash, verdict="incorrect",
        error=f"wrong output from {SECRET}", compile_log=f"nvcc: compiling {SECRET}",
        traceback=f'File "candidate.py", line 9, in {HELPER}', logs=f"printed {SECRET}",
        trials=[{"k": 0, "passed": False, "max_abs_diff": 1.0,
                 "diagnosis": {"hint": f"{SECRET} wrote the wrong half"}}],
        static_report={"kernels": {SECRET: {"line": 9}}, "helpers": [HELPER],
                       "imports": ["torch"], "lines": 11, "bytes": len(SOURCE)},
        profile={"candidate": {"kernels": [kernel], "device_total_us": 5.0}},
        seeds={"seed": 424242},
    )
    NcuReport.objects.create(submission=submission, status=NcuReport.Status.DONE,
                             kernels=[{"name": SECRET}], text=f"ncu: {SECRET}")
    return submission


CASES = ("public", "private", "draft", "competition_running", "competition_ended")
MINE = {"owner", "staff"}


def make_case(name: str, *, owner, hardware) -> tuple[Submission, set[str]]:
    """A submission of the named kind, and who may see its source."""
    problem = make_problem(1, 1 + CASES.index(name),
                           status=Problem.Status.DRAFT if name == "draft" else "published")
    if name == "private":
        Problem.objects.filter(pk=problem.pk).update(
            code_visibility=Problem.CodeVisibility.OWNER
        )
        problem.refresh_from_db()
    hidden_until = {"competition_running": timezone.now() + timedelta(days=1),
                    "competition_ended": timezone.now() - timedelta(days=1)}.get(name)
    submission = stored(problem=problem, hardware=hardware, owner=owner,
                        hidden_until=hidden_until)
    visible = name in ("public", "competition_ended")
    return submission, set(VIEWERS) if visible else MINE


@pytest.fixture
def cases(people, gpu):
    return {name: make_case(name, owner=people["owner"], hardware=gpu) for name in CASES}


def client_for(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def test_the_rule_itself(cases, people):
    for name, (submission, allowed) in cases.items():
        for who in VIEWERS:
            user = people[who] or AnonymousUser()
            assert can_see_source(submission, user) == (who in allowed), (name, who)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("who", VIEWERS)
def test_pages_show_what_is_derived_from_a_source_only_to_who_may_see_it(case, who, people,
                                                                          gpu):
    submission, allowed = make_case(case, owner=people["owner"], hardware=gpu)
    client = client_for(people[who])
    shown = who in allowed
    pk = submission.pk
    for url in (f"/submissions/{pk}/", f"/submissions/{pk}/evaluation/",
                f"/submissions/{pk}/status.json", f"/leaderboard/compare/?a={pk}&b={pk}"):
        body = client.get(url).content.decode()
        assert (SECRET in body) == shown, (url, body[:300] if shown else "")
        assert "424242" not in body or who in ("owner", "staff"), url
    source = client.get(f"/submissions/{pk}/source/")
    assert (source.status_code == 200) == shown
    ncu = client.get(f"/submissions/{pk}/ncu/")
    assert (ncu.status_code == 200 and SECRET in ncu.content.decode()) == shown


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("who", ["stranger", "owner", "staff"])
def test_the_api_gives_what_is_derived_from_a_source_only_to_who_may_see_it(case, who, people,
                                                                            gpu):
    submission, allowed = make_case(case, owner=people["owner"], hardware=gpu)
    api = Client(HTTP_AUTHORIZATION=f"Token {token_for(people[who])}")
    response = api.get(f"/api/v1/submissions/{submission.pk}/")
    raw = response.content.decode()
    shown = who in allowed
    if case == "draft" and who == "stranger":
        # A draft's submission is not there at all for others (selectors.can_see_submission).
        assert response.status_code == 404 and SECRET not in raw
        return
    assert response.status_code == 200
    assert (SECRET in raw) == shown and (HELPER in raw) == shown
    body = json.loads(raw)
    evaluation = body["evaluation"]
    assert evaluation["seeds"] == ({"seed": 424242} if who in ("owner", "staff") else None)
    if not shown:
        assert body["source"] is None and body["source_hash"] is None
        for field in ("static_report", "compile_log", "traceback", "logs", "profile",
                      "diagnosis", "source_hash"):
            assert evaluation[field] is None, field
        assert "diagnosis" not in evaluation["trials"][0]
    else:
        assert evaluation["static_report"]["kernels"] == {SECRET: {"line": 9}}
        assert evaluation["profile"] is not None
    ncu = api.get(f"/api/v1/submissions/{submission.pk}/ncu/")
    assert (ncu.status_code == 200) == shown
    asked = api.post(f"/api/v1/submissions/{submission.pk}/ncu/")
    assert (asked.status_code != 404) == (who in ("owner", "staff"))


def test_live_events_carry_nothing_derived_from_the_source(cases, people):
    for submission, allowed in cases.values():
        # Published to every viewer of the submission and stored as LiveEvent rows.
        payload = json.dumps(submission_status_payload(submission))
        assert SECRET not in payload and "424242" not in payload
        # Server-sent events and websockets add the error text by the same rule.
        for who in VIEWERS:
            user = people[who] or AnonymousUser()
            assert events._may_see_details(submission.pk, user) == (who in allowed)


@pytest.mark.parametrize("who", VIEWERS)
def test_a_drafts_submission_is_not_there_for_others(who, people, gpu):
    submission, allowed = make_case("draft", owner=people["owner"], hardware=gpu)
    there = who in allowed
    client = client_for(people[who])
    pk = submission.pk
    for url in (f"/submissions/{pk}/", f"/submissions/{pk}/evaluation/",
                f"/submissions/{pk}/status.json"):
        assert (client.get(url).status_code == 200) == there, url
    compare = client.get(f"/leaderboard/compare/?a={pk}&b={pk}")
    assert (compare.status_code == 200) == there
    assert (submission.problem.slug in compare.content.decode()) == there
    user = people[who] or AnonymousUser()
    assert events._is_there_for(pk, user) == there


def test_a_competitions_hidden_code_follows_its_end_when_an_admin_moves_it(people, gpu):
    from competitions.models import Competition, Entry
    from competitions.services import competition_close

    now = timezone.now()
    competition = Competition.objects.create(
        slug="spring", title="Spring", hardware=gpu, starts_at=now - timedelta(hours=2),
        ends_at=now + timedelta(hours=1), published=True, code_hidden=True,
    )
    submission, _ = make_case("competition_running", owner=people["owner"], hardware=gpu)
    Entry.objects.create(competition=competition, submission=submission, user=people["owner"],
                         problem=submission.problem)

    def shown() -> bool:
        submission.refresh_from_db()
        return can_see_source(submission, people["stranger"])

    competition.ends_at = now + timedelta(days=3)  # extended: hidden until the new end
    competition.save()
    assert submission.code_hidden_until is not None and not shown()
    assert submission.code_hidden_until == competition.ends_at
    competition.code_hidden = False
    competition.save(update_fields=["code_hidden"])
    assert shown()
    competition.code_hidden = True
    competition.save()
    assert not shown()
    competition_close(competition=competition)
    assert shown()  # ended now: everyone sees it
