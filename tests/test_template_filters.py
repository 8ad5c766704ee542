"""The template filters that turn stored values into what people read, and the chart titles."""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from kbsite import svg
from kbsite.templatetags.kbsite_tags import (
    diff,
    elapsed,
    highlight_python,
    human,
    ms,
    seconds_label,
    times,
)


def test_stored_slugs_read_as_words_and_backends_by_their_names():
    assert human("compile_error") == "compile error"
    assert human("out_of_memory") == "out of memory"
    assert human("correct") == "correct"
    assert (human("cuda"), human("cpp"), human("triton"), human("torch")) == (
        "CUDA", "C++", "Triton", "PyTorch",
    )
    assert human("Cuda") == "CUDA"
    assert human(None) == human("") == ""


def test_differences_show_three_significant_digits_not_eighteen():
    assert diff(0.012345678901234568) == "0.0123"
    assert diff(0.0) == "0"
    assert diff(None) == "–"
    assert diff("n/a") == "n/a"


def test_durations_read_in_seconds_minutes_or_hours():
    assert seconds_label(0.42) == "0.4 s"
    assert seconds_label(27.2) == "27 s"
    assert seconds_label(185) == "3 min 05 s"
    assert seconds_label(7440) == "2 h 04 min"
    start = datetime(2026, 1, 1, tzinfo=UTC)
    done = SimpleNamespace(started_at=start, finished_at=start + timedelta(seconds=27))
    assert elapsed(done) == "27 s"
    assert elapsed(SimpleNamespace(started_at=start, finished_at=None)) == ""


def test_a_chart_title_never_ends_in_a_dangling_comma():
    chart = svg.fast_p_chart([("GPT Test", {0.0: 1.0, 1.0: 0.5})], title="fast_p, ")
    assert "<title>fast_p</title>" in chart
    assert "fast_p," not in chart


def test_a_chart_with_nothing_to_show_is_left_out():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert svg.fast_p_chart([], title="fast_p") == ""
    assert svg.record_chart([], now=now) == ""
    assert svg.histogram_chart([0, 0, 0, 0, 0, 0, 0]) == ""


def test_code_has_line_numbers_and_the_line_a_traceback_names_is_marked():
    source = "import torch\n\nclass ModelNew:\n    def forward(self, x):\n        return x.nope()\n"
    traceback = (
        'Traceback (most recent call last):\n  File "/srv/kb/harness/judge.py", line 9, in run\n'
        '  File "/tmp/slot/candidate.py", line 5, in forward\nAttributeError: nope'
    )
    html = highlight_python(source, traceback)
    assert 'class="linenos"> 5</span>' in html or 'class="linenos">5</span>' in html
    marked = html.split('<span class="hll">')[1].split("\n")[0]
    assert "nope" in marked
    assert '<span class="hll">' not in highlight_python(source)
    assert '<span class="hll">' not in highlight_python(source, 'File "other.py", line 2')


def test_times_and_speedups_read_as_a_dash_when_missing_or_unreadable_instead_of_failing():
    assert ms(0.15334) == "0.1533 ms" and ms("2.5") == "2.5 ms" and ms(0) == "0 ms"
    assert times(1.0512) == "1.05×" and times("3") == "3.00×"
    for missing in (None, "", "n/a", float("nan"), float("inf"), True, [1]):
        assert ms(missing) == "–" and times(missing) == "–"
