"""CPU accounting of the benchmarks: per-process seconds from /proc, deltas between snapshots."""

from __future__ import annotations

import os
import time

import pytest
from z4j.bench import cpu

pytestmark = pytest.mark.skipif(not cpu.available(), reason="needs /proc")


def test_a_busy_process_shows_its_cpu_time() -> None:
    before = cpu.process_seconds([os.getpid()])
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass
    after = cpu.process_seconds([os.getpid()])
    assert cpu.used_between(before, after) >= 0.03


def test_processes_gone_count_nothing_and_new_ones_count_whole() -> None:
    assert cpu.used_between({1: 5.0, 2: 1.0}, {2: 1.5, 3: 0.25}) == pytest.approx(0.75)
    assert cpu.process_seconds([2**22 + 12345]) == {}


def test_this_process_belongs_to_its_group() -> None:
    assert os.getpid() in cpu.group_members(os.getpgid(0))
