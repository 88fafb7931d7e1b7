"""The fleet bench's waits end early when the simulator cannot get the fleet there."""

from __future__ import annotations

import time

import pytest
from strataplane.simulate.bench import wait_for


def test_a_stalled_simulator_ends_the_wait_at_once(pg_admin_url: str) -> None:
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="simulator exited"):
        wait_for(pg_admin_url, "SELECT 0", (), 1, 300, lambda: "the simulator exited with 1")
    assert time.monotonic() - started < 5


def test_a_count_reached_ends_the_wait(pg_admin_url: str) -> None:
    assert wait_for(pg_admin_url, "SELECT %s::int", (3,), 3, 5, lambda: None) < 5
