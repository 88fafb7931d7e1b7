"""When the sidecar replaces its key (``rotation.rotation_due``): with 30 days or less left of
it, never earlier."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentbus_sidecar.rotation import ROTATE_BEFORE, rotation_due
from hypothesis import given
from hypothesis import strategies as st

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


@given(st.integers(min_value=-200 * 86400, max_value=200 * 86400))
def test_a_key_is_rotated_in_its_last_thirty_days_and_after(left_s: int) -> None:
    left = timedelta(seconds=left_s)
    assert rotation_due(NOW + left, NOW) is (left <= ROTATE_BEFORE)


def test_a_ninety_day_key_is_replaced_at_sixty_days() -> None:
    made = NOW - timedelta(days=60)
    assert rotation_due(made + timedelta(days=90), NOW)
    assert not rotation_due(made + timedelta(days=90), NOW - timedelta(seconds=1))
