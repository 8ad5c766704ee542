"""A newcomer's journey through the site in a real browser, against the real server (daphne) and
a real runner with the real sandboxed judge, on a host made busy on purpose (a process spinning
on a core beside the runner): sign up, submit a kernel on the submit page, watch its verdict
arrive live, see the would-be record re-verified and ranked, find the same numbers on the board,
the person's page and the problem page, enter a competition and find the entry in its standings,
and compare the two submissions. Every number shown on two pages must agree.

Only a real browser, server, runner and judge together show that the pages a newcomer reads
agree with each other on a real result. It took over the upload test (a kernel uploaded on the
submit page, its verdict arriving without a reload), which it runs on the way.
"""

import re
import subprocess
import sys
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from competitions.models import Competition
from submissions.models import Submission
from tests.conftest import KERNELS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

PASSWORD = "a-long-passphrase-1"


def number(text: str) -> float:
    """The first number in a page's text ("0.1234 ms", "1.05×", "Rank 1 on ...")."""
    found = re.search(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", text)
    assert found, f"no number in {text!r}"
    return float(found.group())


def same(shown: str, other: str, *, what: str) -> None:
    """Two pages show one number: equal to the precision the coarser of them prints."""
    a, b = number(shown), number(other)
    digits = min(len(re.sub(r"\D", "", str(number(s)))) for s in (shown, other))
    assert abs(a - b) <= max(abs(a), abs(b)) * 10 ** (1 - max(digits, 1)) + 1e-12, (
        f"{what}: {shown!r} against {other!r}")


@pytest.fixture
def busy_host():
    """A process spinning on one core for the whole journey."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                               start_new_session=True)
    yield spinner
    spinner.kill()
    spinner.wait()


@pytest.fixture
def cup(cpu_hardware, relu_problem):
    now = timezone.now()
    competition = Competition.objects.create(
        slug="newbie-cup", title="Newbie cup", hardware=cpu_hardware, daily_limit=5,
        starts_at=now - timedelta(minutes=1), ends_at=now + timedelta(days=1), published=True)
    competition.problems.set([relu_problem])
    return competition


def test_a_newcomer_signs_up_submits_ranks_enters_and_compares_with_agreeing_numbers(
    browser, live_site, start_runner, cpu_hardware, relu_problem, cup, busy_host
):
    """Slow: the whole journey through real pages, a real server, runner and judge."""
    from playwright.sync_api import expect

    # The first correct result on the board is a would-be record: re-verified before it ranks,
    # here by the same runner (alone, with no grace), with intervals wide enough for a busy
    # two-core host.
    start_runner(REVERIFY_NEW_RECORDS="1", REVERIFY_SOLE_RUNNER_GRACE_SECONDS="0",
                 TIMING_INTERVAL_FLOOR="20")
    page = browser.new_page()

    # Sign up: the account is made and logged in.
    page.goto(f"{live_site}/accounts/signup/")
    page.fill("#signup-form input[name=username]", "newbie")
    page.fill("#signup-form input[name=password1]", PASSWORD)
    page.fill("#signup-form input[name=password2]", PASSWORD)
    page.click("#signup-form button[type=submit]")
    page.wait_for_url(f"{live_site}/accounts/profile/")

    # Submit on the submit page, and watch the verdict, then the ranking, arrive live.
    page.goto(f"{live_site}/submissions/new/?problem={relu_problem.slug}")
    page.select_option("#submission-form select[name=backend]", "torch")
    page.select_option("#submission-form select[name=hardware]", "cpu")
    page.set_input_files("#submission-form input[name=source_file]",
                         str(KERNELS / "relu_correct.py"))
    page.click("#submission-form button[type=submit]")
    page.wait_for_url("**/submissions/*/")
    page.evaluate("window.__notReloaded = true")
    expect(page.locator("#verdict")).to_have_text("correct", timeout=180_000)
    expect(page.locator("#ranking")).to_have_attribute("data-state", re.compile(
        "ranked|held|off_board"), timeout=300_000)
    assert page.evaluate("window.__notReloaded") is True
    ranking = page.locator("#ranking").get_attribute("data-state")
    reason = page.text_content("#ranking-reason")
    assert ranking == "ranked", f"an honest record on a busy host did not rank: {reason}"
    record = Submission.objects.get(user__username="newbie")
    assert record.reverification == Submission.ReverificationState.PASSED

    # The page as it stands now (the re-verification's numbers, the ones that count).
    page.goto(f"{live_site}{record.get_absolute_url()}")
    shown_ms = page.text_content("#candidate-ms")
    shown_speedup = page.text_content("#speedup")
    assert page.text_content("#ranking-reason").startswith("Rank 1 on ")

    # The board: rank 1, the same time, speedup and submission.
    key = f"user:{record.user_id}"
    page.goto(f"{live_site}{reverse('problem_board', args=[1, relu_problem.number, 'cpu'])}")
    row = page.locator(f'#board-ranked tr[data-key="{key}"]')
    expect(row).to_have_count(1)
    cells = row.locator("td")
    assert row.locator("td.rank").get_attribute("data-rank") == "1"
    same(cells.nth(2).text_content(), shown_ms, what="the board's median")
    same(cells.nth(3).text_content(), shown_speedup, what="the board's speedup")
    assert cells.nth(9).text_content().strip() == f"#{record.pk}"
    board_reference = page.text_content("#board-reference").split(",")[1]

    # The person's page: the same entry.
    page.goto(f"{live_site}{reverse('leaderboard_user', args=['newbie'])}")
    entry = page.locator(f'tr[data-key="entry-{relu_problem.pk}-cpu-{key}"]')
    expect(entry).to_have_count(1)
    assert entry.locator("td.rank").text_content().strip() == "1"
    same(entry.locator("td").nth(3).text_content(), shown_ms, what="the person page's median")
    same(entry.locator("td").nth(4).text_content(), shown_speedup,
         what="the person page's speedup")

    # The problem page's top results: the same.
    page.goto(f"{live_site}{relu_problem.get_absolute_url()}")
    top = page.locator("table.top-results tbody tr").first
    assert top.locator("td").nth(1).text_content().strip() == "newbie"
    same(top.locator("td").nth(3).text_content(), shown_ms, what="the problem page's time")
    same(top.locator("td").nth(4).text_content(), shown_speedup,
         what="the problem page's speedup")
    same(page.text_content(".board-reference").split(",")[1], board_reference,
         what="the problem page's board reference")

    # Enter the competition on its page, and find the entry in its standings.
    page.goto(f"{live_site}{cup.get_absolute_url()}")
    page.select_option("#entry-form select[name=problem]", str(relu_problem.pk))
    page.select_option("#entry-form select[name=backend]", "torch")
    page.set_input_files("#entry-form input[name=source_file]",
                         str(KERNELS / "relu_correct.py"))
    page.click("#entry-form button[type=submit]")
    page.wait_for_url("**/submissions/*/")
    expect(page.locator("#competition-entry")).to_contain_text("Newbie cup")
    expect(page.locator("#verdict")).to_have_text("correct", timeout=180_000)
    expect(page.locator("#ranking")).to_have_attribute("data-state", re.compile(
        "ranked|held|off_board"), timeout=300_000)
    entry_submission = Submission.objects.filter(user__username="newbie").latest("pk")
    page.goto(f"{live_site}{entry_submission.get_absolute_url()}")
    entry_ms = page.text_content("#candidate-ms")

    page.goto(f"{live_site}{cup.get_absolute_url()}")
    standing = page.locator("#standings-table tr[data-key]").first
    expect(standing.locator("td.person")).to_have_text("newbie")
    assert standing.locator("td.rank").text_content().strip() == "1"
    cell = standing.locator("td.problem-cell").first
    points = number(standing.locator("td.points").text_content())
    assert points > 0 and number(cell.text_content()) == points
    # The standings' time is the entry's own, as its page shows it.
    same(cell.text_content().split("·")[1], entry_ms, what="the standings' time")
    cell.locator("a").click()
    page.wait_for_url(f"**{entry_submission.get_absolute_url()}")

    # Compare the two, chosen among the newcomer's own submissions.
    page.goto(f"{live_site}{reverse('submissions_compare')}")
    # Open at first (nothing compared yet): the newcomer's own submissions to choose from.
    expect(page.locator("#compare-mine")).to_have_attribute("open", "")
    page.select_option("#compare-mine-form select[name=a]", str(record.pk))
    page.select_option("#compare-mine-form select[name=b]", str(entry_submission.pk))
    page.click("#compare-mine-form button[type=submit]")
    medians = page.locator("#compare-table tr.median td")
    expect(medians).to_have_count(2)
    same(medians.nth(0).text_content(), shown_ms, what="the compare page's first median")
    same(medians.nth(1).text_content(), entry_ms, what="the compare page's second median")
    assert page.locator("#compare-table tr.ranks td").nth(0).text_content() == "yes"
