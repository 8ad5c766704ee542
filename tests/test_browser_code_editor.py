"""The code editor of the submit page and the competition entry form (submissions.forms.CodeEditor:
CodeMirror from npm, served from node_modules/, and static/kbsite/code-editor.js), in a real
browser on the real server: what is typed in the editor is what is submitted, and the plain
textarea does the same job without JavaScript or when the editor's files do not load."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone
from playwright.sync_api import expect

from competitions.models import Competition
from problems.starters import starter_source
from submissions.models import Submission
from tests.conftest import kernel_source

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def logged_in(browser, base: str, user, **options):
    """A browser context with the user's session (made by Client.force_login)."""
    client = Client()
    client.force_login(user)
    context = browser.new_context(**options)
    context.add_cookies([{
        "name": settings.SESSION_COOKIE_NAME,
        "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
        "url": base,
    }])
    return context


def errors_of(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


def test_the_code_field_is_an_editor_and_what_is_typed_in_it_is_submitted(
    browser, live_site, user, cpu_hardware, relu_problem
):
    """Slow: the editor is JavaScript: only a real browser types into it and submits."""
    context = logged_in(browser, live_site, user)
    page = context.new_page()
    errors = errors_of(page)
    page.goto(f"{live_site}/submissions/new/?problem={relu_problem.pk}")

    editor = page.locator("#id_source-editor.CodeMirror")
    expect(editor).to_be_visible()
    expect(page.locator("#id_source")).to_be_hidden()
    expect(editor).to_contain_text("class ModelNew")  # the starter, in the editor
    assert editor.locator(".CodeMirror-linenumber").count() > 0
    assert editor.locator(".cm-keyword").count() > 0  # highlighted as Python

    code = kernel_source("relu_correct.py")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(code)
    page.click("#submission-form button[type=submit]")
    page.wait_for_url("**/submissions/*/")

    submission = Submission.objects.get()
    assert submission.source == code
    # Nothing serves the cpu queue in this test: the page says so rather than guessing a time.
    expect(page.locator("#queue-position")).to_have_text(
        "(position 1 in the queue; no runner of cpu is online now)"
    )
    assert errors == []
    context.close()


def test_without_javascript_the_plain_textarea_submits(
    browser, live_site, user, cpu_hardware, relu_problem
):
    """Slow: a real browser with JavaScript off submits the plain form."""
    context = logged_in(browser, live_site, user, java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{live_site}/submissions/new/?problem={relu_problem.pk}")
    textarea = page.locator("textarea#id_source")
    expect(textarea).to_be_visible()
    assert page.locator(".CodeMirror").count() == 0

    code = kernel_source("relu_correct.py")
    textarea.fill(code)
    page.click("#submission-form button[type=submit]")
    page.wait_for_url("**/submissions/*/")
    assert Submission.objects.get().source == code
    context.close()


def test_when_the_editor_files_do_not_load_the_textarea_still_submits(
    browser, live_site, user, cpu_hardware, relu_problem
):
    """Slow: a real browser whose editor files fail to load still submits the textarea."""
    context = logged_in(browser, live_site, user)
    context.route("**/static/codemirror/**", lambda route: route.abort())
    page = context.new_page()
    uncaught = []
    page.on("pageerror", lambda e: uncaught.append(str(e)))
    page.goto(f"{live_site}/submissions/new/?problem={relu_problem.pk}")
    textarea = page.locator("textarea#id_source")
    expect(textarea).to_be_visible()
    assert page.locator(".CodeMirror").count() == 0

    code = kernel_source("relu_correct.py")
    textarea.fill(code)
    page.click("#submission-form button[type=submit]")
    page.wait_for_url("**/submissions/*/")
    assert Submission.objects.get().source == code
    assert uncaught == []  # code-editor.js leaves the page alone without CodeMirror
    context.close()


def test_the_competition_entry_form_has_the_editor_too(
    browser, live_site, user, cpu_hardware, relu_problem
):
    """Slow: the entry form's editor is JavaScript, run by a real browser."""
    now = timezone.now()
    sprint = Competition.objects.create(
        slug="sprint", title="Sprint", hardware=cpu_hardware, backends=["torch"],
        precisions=["fp32"], starts_at=now - timedelta(hours=1), ends_at=now + timedelta(days=1),
        published=True,
    )
    sprint.problems.set([relu_problem])
    context = logged_in(browser, live_site, user)
    page = context.new_page()
    errors = errors_of(page)
    page.goto(f"{live_site}/competitions/sprint/")

    editor = page.locator("#entry-form #id_source-editor.CodeMirror")
    expect(editor).to_be_visible()
    code = kernel_source("relu_correct.py")
    editor.click()
    page.keyboard.insert_text(code)
    page.select_option("#entry-form select[name=problem]", str(relu_problem.pk))
    page.click("#entry-form button[type=submit]")
    page.wait_for_url("**/submissions/*/")

    assert Submission.objects.get().source == code
    assert errors == []
    context.close()


def test_the_submit_pages_two_problem_selectors_stay_in_step(
    browser, live_site, user, cpu_hardware, sample_problems
):
    """Slow: the starter picker and the form's own problem select name one problem (issue 65:
    they drifted apart, and the editor kept the other problem's starter). Choosing in either
    chooses in the other; an untouched starter becomes the new problem's, and that is what is
    submitted; code someone edited stays, with a note of whose starter it began as."""
    relu, matmul, add = (sample_problems[s] for s in (
        "level1/901_Small_ReLU", "level1/902_Small_Matmul", "level1/904_Small_Add"))
    context = logged_in(browser, live_site, user)
    page = context.new_page()
    errors = errors_of(page)
    page.goto(f"{live_site}/submissions/new/?problem={relu.slug}")
    editor = page.locator("#id_source-editor.CodeMirror")
    expect(editor).to_contain_text(f"starter for {relu.slug}")
    expect(page.locator("#starter-problem")).to_have_value(relu.slug)

    # The form's problem: the picker follows, and so does the untouched starter.
    page.select_option("#id_problem", str(matmul.pk))
    expect(page.locator("#starter-problem")).to_have_value(matmul.slug)
    expect(editor).to_contain_text(f"starter for {matmul.slug}")
    expect(editor).not_to_contain_text(relu.slug)
    expect(page.locator("#starter-note")).to_be_hidden()

    # The picker's problem: the form follows, and the starter too.
    page.select_option("#starter-problem", add.slug)
    expect(page.locator("#id_problem")).to_have_value(str(add.pk))
    expect(editor).to_contain_text(f"starter for {add.slug}")

    page.click("#submission-form button[type=submit]")
    page.wait_for_url("**/submissions/*/")
    submission = Submission.objects.get()
    assert submission.problem == add
    assert submission.source == starter_source(problem=add, backend=submission.backend)

    # Edited code is the user's: it stays when the problem changes, and a note says so.
    page.goto(f"{live_site}/submissions/new/?problem={relu.slug}")
    expect(editor).to_contain_text(f"starter for {relu.slug}")
    editor.click()
    page.keyboard.press("Control+End")
    page.keyboard.insert_text("\n# my change\n")
    page.select_option("#id_problem", str(matmul.pk))
    expect(page.locator("#starter-problem")).to_have_value(matmul.slug)
    expect(page.locator("#starter-note")).to_contain_text(
        f"began as the starter of {relu.slug}, not of {matmul.slug}")
    code = page.locator("#id_source").input_value()  # the field the editor writes to
    assert code.startswith(f"# A PyTorch starter for {relu.slug}") and "# my change" in code
    assert errors == []
    context.close()
