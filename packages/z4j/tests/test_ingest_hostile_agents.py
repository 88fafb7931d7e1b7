"""Hostile task data through real Celery workers (Redis), with the real z4j-celery agent and
with ours: NUL, lone surrogates, integers past bigint, deep and oversize arguments. The bad
values are repaired or their events refused, later tasks arrive, and no batch is resent for
ever (the brain logs no traceback and each agent's buffer drains)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from z4j.testing import wait_for

from .test_e2e_celery import Stack, stack  # noqa: F401 - the fixture, used by name
from .test_real_agent import RealStack, real_stack  # noqa: F401 - the fixture, used by name

NUL, LONE = "a\x00b", "x\ud800y"


def deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


def hostile_args() -> list[tuple[Any, Any]]:
    return [(NUL, "c"), (LONE, "z"), (2**70, 1), (deep(200), []), ("o" * 2_000_000, "!")]


def assert_no_traceback(log: str) -> None:
    records = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert "Traceback" not in log
    assert all(r["level"] != "error" for r in records if r["logger"].startswith("z4j")), log[-3000:]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("real_stack", ["ws"], indirect=True)
async def test_the_real_agent_carries_on_past_hostile_task_data(real_stack: RealStack) -> None:  # noqa: F811
    app = real_stack.app
    hostile = [app.send_task("real.add", args).id for args in hostile_args()]
    after = app.send_task("real.add", (2, 3)).id
    await real_stack.state_of(after, "succeeded", within=90)
    tasks = await real_stack.tasks()
    for task_id in hostile:
        assert task_id in tasks, real_stack.logs()
    stored = json.dumps([tasks[t]["args_redacted"] for t in hostile], ensure_ascii=False)
    assert "\x00" not in stored
    assert_no_traceback(real_stack.brain.log_path.read_text(errors="replace"))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("stack", [("redis", "solo")], indirect=True, ids="-".join)
async def test_our_agent_carries_on_past_hostile_task_data(stack: Stack) -> None:  # noqa: F811
    app = stack.app
    hostile = [app.send_task("e2e.add", args).id for args in hostile_args()]
    after = app.send_task("e2e.add", (2, 3)).id
    await stack.settle({after: ("succeeded", Counter(["task_sent", "started", "succeeded"]))})
    tasks = await stack.tasks()
    for task_id in hostile:
        assert task_id in tasks, stack.logs()
    assert tasks[hostile[0]]["args_redacted"][0] == "a\ufffdb"
    assert tasks[hostile[1]]["args_redacted"][0] == "x\ufffdy"
    assert tasks[hostile[2]]["args_redacted"][0] == 2**70
    events = await stack.events()
    assert any(e["payload"].get("z4j_repaired") for e in events[hostile[0]])
    assert_no_traceback(stack.brain.log_path.read_text(errors="replace"))

    async def drained() -> bool:
        return stack.buffered()[0] == 0

    assert await wait_for(drained, within=60), stack.logs()
