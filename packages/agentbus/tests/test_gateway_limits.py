"""The limit rules (05 §11, 04 §1.6) as properties: the token bucket never allows more than
its capacity at once nor more than its refill over time (also with a burst below the rate), a
refusal changes nothing and names a wait after which a token is there, and the time until it is
full again is exact; backlog and stream checks; ``Retry-After`` rounding."""

from __future__ import annotations

from agentbus.gateway.domain.limits import (
    Bucket,
    backlog_full,
    full_in_s,
    give_back,
    refill,
    retry_after_header,
    stream_full,
    take,
)
from hypothesis import given
from hypothesis import strategies as st

rates = st.integers(min_value=1, max_value=100_000)
times = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
gaps = st.lists(st.floats(min_value=0, max_value=120, allow_nan=False), max_size=200)


@given(st.integers(min_value=1, max_value=2000), times)
def test_a_quiet_sender_may_burst_exactly_its_rate(per_minute: int, now: float) -> None:
    bucket, allowed = None, 0
    for _ in range(per_minute + 1):
        taken = take(bucket, now, per_minute)
        allowed += taken.allowed
        bucket = taken.bucket
    assert allowed == per_minute


@given(rates, times, gaps)
def test_no_more_than_capacity_plus_refill_over_any_run(
    per_minute: int, start: float, steps: list[float]
) -> None:
    bucket, now, allowed = None, start, 0
    for gap in steps:
        now += gap
        taken = take(bucket, now, per_minute)
        allowed += taken.allowed
        bucket = taken.bucket
        assert 0.0 <= bucket.tokens <= per_minute
    assert allowed <= per_minute + (now - start) * per_minute / 60.0 + 1e-6


@given(rates, times, st.floats(min_value=0, max_value=0.999, allow_nan=False))
def test_a_refusal_takes_nothing_and_names_a_sufficient_wait(
    per_minute: int, now: float, tokens: float
) -> None:
    bucket = Bucket(tokens, now)
    taken = take(bucket, now, per_minute)
    assert not taken.allowed
    assert taken.bucket == bucket
    assert taken.retry_after_s is not None
    assert taken.retry_after_s > 0
    assert take(taken.bucket, now + taken.retry_after_s * (1 + 1e-9) + 1e-9, per_minute).allowed


@given(rates, times, st.floats(min_value=0, max_value=1e5, allow_nan=False), times)
def test_refill_is_capped_and_never_goes_back_in_time(
    per_minute: int, at: float, tokens: float, now: float
) -> None:
    start = Bucket(min(tokens, float(per_minute)), at)
    after = refill(start, now, per_minute)
    assert start.tokens <= after.tokens <= per_minute
    assert after.at == max(at, now)
    assert refill(None, now, per_minute) == Bucket(float(per_minute), now)


def test_a_zero_rate_refuses_everything() -> None:
    taken = take(None, 10.0, 0)
    assert not taken.allowed
    assert taken.retry_after_s == 60.0


@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=1, max_value=10**9))
def test_backlog_and_stream_are_full_at_their_limit(count: int, limit: int) -> None:
    assert backlog_full(count, limit) == (count >= limit)
    assert stream_full(count, limit) == (count >= limit)
    assert backlog_full(limit, limit)
    assert stream_full(limit, limit)


@given(st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_retry_after_is_whole_seconds_never_short_and_never_zero(seconds: float) -> None:
    header = retry_after_header(seconds)
    assert isinstance(header, int)
    assert header >= seconds
    assert header >= 1
    assert header < seconds + 1 or header == 1


@given(rates, st.integers(min_value=1, max_value=100_000), times, gaps)
def test_a_burst_caps_what_a_quiet_client_may_do_at_once(
    per_minute: int, capacity: int, start: float, steps: list[float]
) -> None:
    bucket, now, allowed = None, start, 0
    for gap in steps:
        now += gap
        taken = take(bucket, now, per_minute, capacity)
        allowed += taken.allowed
        bucket = taken.bucket
        assert 0.0 <= bucket.tokens <= capacity
    assert allowed <= capacity + (now - start) * per_minute / 60.0 + 1e-6


@given(st.integers(min_value=1, max_value=500), st.integers(min_value=1, max_value=500), times)
def test_a_new_bucket_allows_exactly_its_burst(per_minute: int, capacity: int, now: float) -> None:
    bucket, allowed = None, 0
    for _ in range(capacity + 1):
        taken = take(bucket, now, per_minute, capacity)
        allowed += taken.allowed
        bucket = taken.bucket
    assert allowed == capacity


@given(rates, st.integers(min_value=1, max_value=100_000), times, st.floats(0, 1, allow_nan=False))
def test_full_in_is_when_the_bucket_is_full_again(
    per_minute: int, capacity: int, at: float, share: float
) -> None:
    bucket = Bucket(capacity * share, at)
    wait = full_in_s(bucket, per_minute, capacity)
    assert wait >= 0
    assert refill(bucket, at + wait, per_minute, capacity).tokens >= capacity - 1e-6
    if wait > 1e-6:
        assert refill(bucket, at + wait * 0.5, per_minute, capacity).tokens < capacity
    assert full_in_s(refill(None, at, per_minute, capacity), per_minute, capacity) == 0


@given(
    rates,
    times,
    st.floats(0, 1, allow_nan=False),
    st.integers(1, 50),
    st.floats(0, 120, allow_nan=False),
)
def test_tokens_given_back_leave_the_bucket_as_if_never_taken(
    per_minute: int, now: float, level: float, tokens: int, later: float
) -> None:
    """The tokens of undone sends, given back at any later moment, leave the bucket where it
    would be had they not been taken, never above its capacity."""
    start = Bucket(level * per_minute, now)
    bucket, taken_n = start, 0
    for _ in range(tokens):
        taken = take(bucket, now, per_minute)
        if not taken.allowed:
            break
        bucket, taken_n = taken.bucket, taken_n + 1
    given = give_back(bucket, now + later, per_minute, taken_n)
    untaken = refill(start, now + later, per_minute)
    assert given.tokens <= per_minute
    assert abs(given.tokens - untaken.tokens) <= 1e-9 * per_minute
    assert given.at == untaken.at
