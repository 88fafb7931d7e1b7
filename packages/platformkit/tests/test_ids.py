"""UUIDv7: bit layout, strict monotonicity (threads, clock steps), time extraction."""

from __future__ import annotations

import itertools
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from platformkit.ids import Uuid7Generator, uuid7, uuid7_time


class FakeClock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def test_version_and_variant_bits() -> None:
    for _ in range(1000):
        u = uuid7()
        assert u.version == 7
        assert u.variant == uuid.RFC_4122
        assert (u.int >> 76) & 0xF == 0x7
        assert (u.int >> 62) & 0b11 == 0b10


def test_string_form_shows_version_nibble() -> None:
    assert str(uuid7())[14] == "7"


def test_strictly_monotonic_over_100k_calls() -> None:
    ids = [uuid7() for _ in range(100_000)]
    assert all(a < b for a, b in itertools.pairwise(ids))
    # Byte order and string order agree with integer order, which is what databases sort by.
    assert [u.bytes for u in ids] == sorted(u.bytes for u in ids)
    assert len(set(ids)) == len(ids)


def test_same_millisecond_stays_ordered_and_keeps_timestamp() -> None:
    clock = FakeClock(1_700_000_000_000)
    gen = Uuid7Generator(clock)
    ids = [gen() for _ in range(10_000)]
    assert all(a < b for a, b in itertools.pairwise(ids))
    assert {u.int >> 80 for u in ids} == {clock.ms}


def test_clock_stepping_back_does_not_break_order() -> None:
    clock = FakeClock(1_700_000_000_500)
    gen = Uuid7Generator(clock)
    first = gen()
    clock.ms -= 10_000
    second = gen()
    assert second > first
    assert uuid7_time(second) == uuid7_time(first)
    clock.ms += 20_000
    third = gen()
    assert third > second
    assert third.int >> 80 == clock.ms


def test_counter_exhaustion_borrows_next_millisecond() -> None:
    clock = FakeClock(1_000)
    gen = Uuid7Generator(clock)
    first = gen()
    gen._counter = (1 << 74) - 1  # force the overflow branch without 2**73 calls
    second = gen()
    assert second > first
    assert second.int >> 80 == 1_001
    assert second.version == 7


def test_timestamp_overflow_rejected() -> None:
    gen = Uuid7Generator(FakeClock(1 << 48))
    with pytest.raises(OverflowError):
        gen()


def test_new_millisecond_reseeds_randomly() -> None:
    clock = FakeClock(5_000)
    low_bits = set()
    gen = Uuid7Generator(clock)
    for _ in range(50):
        clock.ms += 1
        low_bits.add(gen().int & ((1 << 62) - 1))
    assert len(low_bits) == 50


def test_time_extraction_matches_now() -> None:
    before = datetime.now(UTC)
    u = uuid7()
    after = datetime.now(UTC)
    ts = uuid7_time(u)
    assert ts.tzinfo is UTC
    assert before - timedelta(milliseconds=1) <= ts <= after


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LAST_DATETIME_MS = (datetime.max.replace(tzinfo=UTC) - _EPOCH) // timedelta(milliseconds=1)


@given(st.integers(min_value=0, max_value=_LAST_DATETIME_MS))
def test_time_extraction_is_exact(ms: int) -> None:
    u = Uuid7Generator(FakeClock(ms))()
    assert u.int >> 80 == ms
    assert uuid7_time(u) == _EPOCH + timedelta(milliseconds=ms)


def test_time_beyond_datetime_range_is_a_value_error() -> None:
    u = Uuid7Generator(FakeClock((1 << 48) - 1))()
    with pytest.raises(ValueError, match="beyond"):
        uuid7_time(u)


@pytest.mark.parametrize("other", [uuid.uuid4(), uuid.UUID(int=0), uuid.uuid1()])
def test_time_extraction_rejects_other_versions(other: uuid.UUID) -> None:
    with pytest.raises(ValueError, match="version 7"):
        uuid7_time(other)


@pytest.fixture
def fast_thread_switching() -> Iterator[None]:
    # Switch threads far more often than the 5 ms default so an unguarded read-modify-write
    # of the generator's state would interleave within a few thousand calls.
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


@pytest.mark.usefixtures("fast_thread_switching")
@pytest.mark.parametrize("frozen", [False, True])
def test_thread_safety(frozen: bool) -> None:
    per_thread = 5_000
    gen = Uuid7Generator(FakeClock(1_700_000_000_000)) if frozen else uuid7
    results: list[list[uuid.UUID]] = [[] for _ in range(8)]
    barrier = threading.Barrier(len(results))

    def work(out: list[uuid.UUID]) -> None:
        barrier.wait()
        out.extend(gen() for _ in range(per_thread))

    threads = [threading.Thread(target=work, args=(out,)) for out in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [u for out in results for u in out]
    assert len(set(everything)) == len(everything) == 8 * per_thread
    for out in results:
        # Each thread sees its own ids in increasing order because they share one generator.
        assert all(a < b for a, b in itertools.pairwise(out))


def test_reset_reseeds() -> None:
    clock = FakeClock(9_000)
    gen = Uuid7Generator(clock)
    gen()
    gen.reset()
    assert gen._last_ms == -1
    assert gen().int >> 80 == 9_000
