"""CPU accounting of the benchmarks: per-process seconds from /proc, deltas between snapshots."""

from __future__ import annotations

import os
import subprocess
import sys
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


def test_a_child_in_a_session_of_its_own_is_a_descendant() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "input()"], stdin=subprocess.PIPE, start_new_session=True
    )
    try:
        assert {os.getpid(), child.pid} <= set(cpu.descendants(os.getpid()))
    finally:
        child.communicate(b"\n", timeout=30)
