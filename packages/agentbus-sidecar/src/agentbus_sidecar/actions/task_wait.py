"""Waiting for a task to end (``agentbus task wait``), as a requester that hands work to another
agent and needs its result before going on.

Each round first flushes the outbox, so a request queued while the gateway was away goes out
(and a wait can start right after an offline ``task request``); while the request is still in
the outbox there is no task to ask about yet. Then it asks the gateway for the task
(``GET /v1/tasks/{tsk}``), reports every change of state or progress, and stops once the state
is terminal. Polls start at half a second and grow by half up to five seconds while nothing
changes, and start over after a change. An unreachable gateway is asked again until the time
is up: a wait outlives a gateway restart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agentbus_sidecar.errors import EnvelopeError, GatewayUnreachable
from agentbus_sidecar.ids import request_msg_id_for
from agentbus_sidecar.runtime import Runtime
from agentbus_sidecar.store import outbox
from agentbus_sidecar.sync import flush

__all__ = ["TERMINAL", "WaitResult", "next_poll_s", "wait_for_task"]

TERMINAL = frozenset({"completed", "failed", "rejected", "cancelled", "expired"})
FIRST_POLL_S, MAX_POLL_S, GROWTH = 0.5, 5.0, 1.5


def next_poll_s(previous: float | None, changed: bool) -> float:
    """Seconds to the next poll: the first after a start or a change, else the previous one
    grown by half, never more than ``MAX_POLL_S``."""
    if previous is None or changed:
        return FIRST_POLL_S
    return min(MAX_POLL_S, max(FIRST_POLL_S, previous * GROWTH))


@dataclass
class WaitResult:
    """How a wait ended: ``ended`` (the task's state is terminal), ``timed_out``, or
    ``refused`` (the request was refused for good and parked, so the task will never exist).
    ``task`` is the gateway's view as last seen (None before the request went out)."""

    outcome: str
    task: dict[str, Any] | None
    waited_s: float
    detail: str | None = None


def _view(task: dict[str, Any]) -> tuple[Any, ...]:
    progress = task.get("progress") or {}
    return (task.get("state"), progress.get("percent"), progress.get("stage"), progress.get("at"))


async def wait_for_task(
    rt: Runtime,
    task_id: str,
    timeout_s: float,
    on_change: Callable[[dict[str, Any]], None],
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> WaitResult:
    """Poll until the task ends or ``timeout_s`` passes; ``on_change`` gets the task whenever
    its state or progress differs from the last one seen. A refusal of the read itself (the
    task is not the caller's, AB-8002) raises ``GatewayError``."""
    try:
        request_id = request_msg_id_for(task_id)
    except ValueError as exc:
        raise EnvelopeError(str(exc)) from exc
    start = clock()
    deadline = start + timeout_s
    delay: float | None = None
    seen: tuple[Any, ...] | None = None
    task: dict[str, Any] | None = None
    trouble: str | None = None
    while True:
        changed = False
        report = await flush(rt)
        queued = outbox.get(rt.conn, request_id)
        if queued is not None and queued["next_attempt_at"] == outbox.PARKED:
            return WaitResult("refused", None, clock() - start, queued["last_error"])
        if queued is None:
            try:
                task = await rt.session.call(rt.client.get_task, task_id)
                trouble = None
            except GatewayUnreachable as exc:
                trouble = str(exc)
            else:
                if (view := _view(task)) != seen:
                    seen, changed = view, True
                    on_change(task)
                if task.get("state") in TERMINAL:
                    return WaitResult("ended", task, clock() - start)
        else:
            trouble = report.unreachable or "the request is still in the outbox"
        left = deadline - clock()
        if left <= 0:
            return WaitResult("timed_out", task, clock() - start, trouble)
        delay = next_poll_s(delay, changed)
        await sleep(min(delay, left))
