"""Waiting for the answer to a message (``agentbus wait-reply``): a message in this agent's
inbox whose ``correlation`` is the one asked about, as ``agentbus reply`` sends it.

The local inbox is looked at first, so an answer that came in earlier is found at once. While a
``sidecar run`` holds the agent's lock it receives for everyone and the wait only watches the
local store (every half second); otherwise the wait receives itself, flushing the outbox and
long-polling in slices of at most ``SLICE_S`` so that a loop started meanwhile is noticed
(a second long-poll would only replace the loop's). An unreachable gateway is asked again
every ``RETRY_S`` until the time is up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentbus_sidecar.clock import utcnow
from agentbus_sidecar.errors import EnvelopeError
from agentbus_sidecar.ids import parse_id
from agentbus_sidecar.runtime import Runtime
from agentbus_sidecar.store import inbox
from agentbus_sidecar.sync import run_lock_held, sync_once

__all__ = ["ReplyWait", "wait_for_reply"]

SLICE_S, WATCH_S, RETRY_S = 5, 0.5, 2.0


@dataclass
class ReplyWait:
    """The answer's envelope (None when the time ran out), how long it took, and why the last
    round could not ask the gateway (None when it could), as ``task_wait.WaitResult`` has it."""

    envelope: dict[str, Any] | None
    waited_s: float
    detail: str | None = None


async def wait_for_reply(
    rt: Runtime,
    msg_id: str,
    timeout_s: float,
    state_db: Path,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> ReplyWait:
    try:
        parse_id(msg_id, "msg")
    except ValueError as exc:
        raise EnvelopeError(str(exc)) from exc
    start = clock()
    deadline = start + timeout_s
    trouble: str | None = None
    while True:
        found = inbox.first_reply(rt.conn, msg_id, utcnow())
        if found is not None:
            return ReplyWait(inbox.envelope_of(found), clock() - start)
        left = deadline - clock()
        if left <= 0:
            return ReplyWait(None, clock() - start, trouble)
        if run_lock_held(state_db):
            trouble = None
            await sleep(min(WATCH_S, left))
            continue
        report = await sync_once(rt, wait_s=max(1, min(SLICE_S, int(left))))
        trouble = report.flush.unreachable
        if trouble is not None:
            await sleep(min(RETRY_S, max(0.0, deadline - clock())))
