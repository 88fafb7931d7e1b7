"""Envelope timestamps: one exact text form, UTC with milliseconds, that parses back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from agentbus.gateway.domain.wire import format_ts, parse_ts
from hypothesis import given
from hypothesis import strategies as st

zones = st.integers(min_value=-14 * 60, max_value=14 * 60).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
moments = st.datetimes(
    min_value=datetime(1000, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC) | zones
)


@given(moments)
def test_the_text_is_utc_with_milliseconds_truncated(moment: datetime) -> None:
    utc = moment.astimezone(UTC)
    expected = utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
    assert format_ts(moment) == expected


@given(moments)
def test_the_text_parses_back_to_the_same_millisecond(moment: datetime) -> None:
    parsed = parse_ts(format_ts(moment))
    assert parsed == moment - timedelta(microseconds=moment.microsecond % 1000)
