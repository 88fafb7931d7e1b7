"""How far the ingester may read ``events``: the newest mark no running transaction predates,
the UUIDv7 below which every id drawn earlier sorts, and a 32-bit transaction id made whole."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from agentbus.analytics.horizon import EPOCH, Mark, safe_mark, uuid_floor, widen
from hypothesis import given
from hypothesis import strategies as st

START = datetime(2026, 12, 6, tzinfo=UTC)
times = st.integers(min_value=0, max_value=10**12).map(
    lambda us: START + timedelta(microseconds=us)
)
marks = st.lists(st.tuples(times, st.integers(min_value=3, max_value=10**6)), max_size=30).map(
    lambda pairs: [Mark(at, xid) for at, xid in sorted(pairs)]
)


def drawn(at: datetime, rand: int) -> uuid.UUID:
    """A UUIDv7 as PostgreSQL's ``uuidv7()`` draws it at ``at``: milliseconds, the 12-bit
    fraction of the millisecond, then random bits under the variant."""
    micros = (at - EPOCH) // timedelta(microseconds=1)
    ms, within = divmod(micros, 1000)
    return uuid.UUID(
        int=(ms << 80) | (0x7 << 76) | ((within * 4096 // 1000) << 64) | (0x2 << 62) | rand
    )


@given(marks, st.integers(min_value=3, max_value=10**6))
def test_the_safe_mark_is_the_newest_no_running_transaction_predates(
    noted: list[Mark], oldest: int
) -> None:
    safe = safe_mark(noted, oldest)
    passed = [m for m in noted if m.next_xid <= oldest]
    if not passed:
        assert safe is None
        return
    assert safe in passed
    assert all(m.next_xid <= safe.next_xid for m in passed)


def test_no_mark_is_safe_while_a_transaction_from_before_it_runs() -> None:
    noted = [Mark(START, 100), Mark(START + timedelta(seconds=1), 120)]
    assert safe_mark(noted, 99) is None
    assert safe_mark(noted, 110) == noted[0]
    assert safe_mark(noted, 120) == noted[1]


@given(times, times, st.integers(min_value=0, max_value=(1 << 62) - 1))
def test_an_id_drawn_before_the_floor_sorts_below_it(
    earlier: datetime, at: datetime, rand: int
) -> None:
    floor = uuid_floor(at)
    assert drawn(at, rand) >= floor
    if uuid_floor(earlier) < floor:
        assert drawn(earlier, rand) < floor
        assert drawn(earlier, rand).bytes < floor.bytes  # as PostgreSQL compares uuids


def test_the_floor_of_a_known_uuidv7() -> None:
    # uuidv7() drawn at 14:22:10.382760 UTC on this day by PostgreSQL 18
    seen = uuid.UUID("01a24bbb-d3ce-7c28-99c7-e2539a0b0e08")
    at = datetime(2026, 12, 6, 14, 22, 10, 382760, tzinfo=UTC)
    assert uuid_floor(at) <= seen < uuid_floor(at + timedelta(microseconds=250))


@given(
    st.integers(min_value=1 << 31, max_value=1 << 60),
    st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1),
)
def test_a_transaction_id_is_widened_to_the_one_near_the_next(near: int, offset: int) -> None:
    full = near + offset
    assert widen(full & 0xFFFFFFFF, near) == full


def test_a_transaction_id_from_before_a_wraparound_of_its_low_bits() -> None:
    near = (5 << 32) + 10  # the next id, just past the epoch's start
    assert widen(0xFFFFFFF0, near) == (4 << 32) + 0xFFFFFFF0
