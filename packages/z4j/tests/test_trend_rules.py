"""The trend and chart rules: windows cut into whole buckets, filling keeps every bucket once,
the scale's ceiling holds every value on round numbers, and every mark stays in the plot; what
a task's events say about its return value and retries."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st
from z4j.domain import charts
from z4j.domain.task_story import result_of, retries_of
from z4j.domain.trends import WINDOWS, Bucket, bucket_start, fill, totals

BASE = datetime(2026, 12, 1, tzinfo=UTC)
windows = st.sampled_from(list(WINDOWS.values()))
moments = st.integers(0, 10**9).map(lambda s: BASE + timedelta(seconds=s))
values = st.floats(0, 1e9, allow_nan=False)
maybe = st.one_of(st.none(), values)


@given(windows, moments)
def test_a_window_is_whole_buckets_ending_after_now(window: object, now: datetime) -> None:
    assert isinstance(window, type(WINDOWS["1h"]))
    since, until = window.bounds(now)
    assert until - since == window.span
    assert since < now < until or now == until - window.step  # now is in the last bucket
    assert bucket_start(now, window.step) == until - window.step
    assert (since - bucket_start(since, window.step)) == timedelta(0)


@given(windows, moments, st.lists(st.integers(0, 200), max_size=20))
def test_fill_keeps_every_bucket_once(window: object, now: datetime, picks: list[int]) -> None:
    assert isinstance(window, type(WINDOWS["1h"]))
    since, _ = window.bounds(now)
    rows = [Bucket(since + i * window.step, finished=i + 1, failed=i % 2) for i in set(picks)]
    filled = fill(window, since, rows)
    assert len(filled) == window.buckets
    assert [b.start for b in filled] == [since + i * window.step for i in range(window.buckets)]
    inside = [r for r in rows if r.start < since + window.span]
    assert totals(filled).finished == sum(r.finished for r in inside)


@given(values)
def test_the_ceiling_is_round_and_holds_the_value(value: float) -> None:
    ceiling = charts.nice_ceiling(value)
    step = ceiling / charts.y_steps(ceiling)
    assert re.fullmatch(r"[125]", f"{step:.0e}"[0])  # gridlines on round numbers
    assert ceiling >= value
    assert ceiling <= max(value * 2.5, 1.0) or value < 1
    assert re.fullmatch(r"[125]", f"{ceiling:.0e}"[0])


def _in_plot(chart: charts.Chart, x: float, y: float) -> bool:
    return chart.left <= x <= chart.right and chart.top - 0.05 <= y <= chart.bottom + 0.05


@given(st.lists(st.tuples(maybe, maybe), min_size=1, max_size=120))
def test_lines_stay_in_the_plot_and_break_at_gaps(points: list[tuple[float | None, ...]]) -> None:
    labels = [str(i) for i in range(len(points))]
    a, b = [p[0] for p in points], [p[1] for p in points]
    chart = charts.line_chart("t", labels, [("a", "s-a", a), ("b", "s-b", b)], str)
    assert chart.ceiling >= max((v for v in a + b if v is not None), default=0)
    for line, series in zip(chart.lines, (a, b), strict=True):
        marks = re.findall(r"([ML])(-?[\d.]+),(-?[\d.]+)", line.path)
        assert len(marks) == sum(v is not None for v in series)
        starts = sum(
            1 for i, v in enumerate(series) if v is not None and (i == 0 or series[i - 1] is None)
        )
        assert sum(m[0] == "M" for m in marks) == starts
        assert all(_in_plot(chart, float(x), float(y)) for _c, x, y in marks)
        assert len(line.points) == len(marks)
    assert len(chart.x_ticks) <= charts.MAX_X_TICKS


@given(st.lists(values, min_size=1, max_size=120))
def test_bars_stand_on_the_axis_and_the_tallest_is_the_largest(heights: list[float]) -> None:
    chart = charts.bar_chart("t", [str(i) for i in range(len(heights))], heights, str)
    for bar in chart.bars:
        assert abs(bar.y + bar.height - chart.bottom) < 0.05
        assert _in_plot(chart, bar.x, bar.y)
        assert _in_plot(chart, bar.x + bar.width, bar.y)
    tallest = max(range(len(heights)), key=lambda i: chart.bars[i].height)
    assert heights[tallest] == max(heights) or chart.bars[tallest].height == max(
        b.height for b in chart.bars
    )


def test_the_latest_result_and_each_retry_with_its_reason() -> None:
    events = [
        {"event_type": "retry", "ts": BASE, "payload": {"reason": "Retry in 5s",
         "exception": {"type": "IOError", "message": "down"}}},
        {"event_type": "retry", "ts": BASE, "payload": {}},
        {"event_type": "succeeded", "ts": BASE, "payload": {"result": None}},
    ]  # fmt: skip
    assert result_of(events) == (True, None)
    assert result_of(events[:2]) == (False, None)
    first, second = retries_of(events)
    assert (first.reason, first.exc_type, first.exc_msg) == ("Retry in 5s", "IOError", "down")
    assert (second.reason, second.exc_type) == (None, None)
