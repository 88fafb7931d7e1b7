"""Delivering commands to connected agents, and timing out the ones no agent answers.

Delivery works across brain replicas without anything but PostgreSQL: queuing a command sends
``NOTIFY z4j_commands, '<agent id>'`` at commit; every brain process listens, and each of its
connections of that agent wakes and claims the agent's queued commands (``FOR UPDATE SKIP
LOCKED``, so exactly one connection sends each). A connection also looks every
``POLL_SECONDS`` and right after its handshake, so a notification lost while a listener
reconnects only delays a command.

The timeout sweeper runs on one replica at a time: a ``platformkit.jobs.LeaderLoop`` on one
advisory-lock key marks open commands past their deadline ``timed_out``; the same leader carries
bulk retries forward (``z4j.controllers.bulk_retries``) and deletes idle long-poll sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
from platformkit.jobs import LeaderLoop, LockKey, shard_keys

from z4j.brain import Brain
from z4j.controllers import bulk_retries
from z4j.store import commands as command_store
from z4j.store import http_sessions as http_session_store
from z4j.store.commands import COMMANDS_CHANNEL

log = logging.getLogger("z4j.commands")
POLL_SECONDS = 5.0
CLAIM_LIMIT = 50
SWEEP_KEY = shard_keys("z4j.command_timeouts", 1)[0]


def command_frame_payload(row: dict[str, Any]) -> dict[str, Any]:
    """The ``command`` frame's payload as both z4j agents read it."""
    return {
        "command_id": str(row["id"]),
        "action": row["action"],
        "target": row["target"],
        "parameters": row["parameters"],
        "timeout_seconds": row["timeout_seconds"],
        "issued_by": str(row["issued_by"]) if row["issued_by"] is not None else None,
    }


async def claim(
    brain: Brain, project_id: uuid.UUID, agent_id: uuid.UUID, limit: int = CLAIM_LIMIT
) -> list[dict[str, Any]]:
    async with brain.project_tx(project_id) as conn:
        rows = await command_store.claim(conn, agent_id, limit, datetime.now(UTC))
    if rows:
        await brain.notify_change()
    return rows


@contextlib.contextmanager
def waker(brain: Brain, agent_id: uuid.UUID) -> Any:
    """An event set whenever a command for ``agent_id`` is queued, while the block runs."""
    event = asyncio.Event()
    event.set()  # look once at the start: commands may be waiting already
    brain.command_wakers.setdefault(agent_id, set()).add(event)
    try:
        yield event
    finally:
        wakers = brain.command_wakers.get(agent_id)
        if wakers is not None:
            wakers.discard(event)
            if not wakers:
                del brain.command_wakers[agent_id]


async def pump(
    brain: Brain,
    project_id: uuid.UUID,
    agent_id: uuid.UUID,
    send: Callable[[dict[str, Any]], Awaitable[None]],
) -> None:
    """Send the agent's commands over one connection for as long as it lives."""
    with waker(brain, agent_id) as wake:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), POLL_SECONDS)
            wake.clear()
            try:
                rows = await claim(brain, project_id, agent_id)
            except psycopg.Error:
                log.warning("claiming commands of agent %s failed", agent_id, exc_info=True)
                continue
            for row in rows:
                await send(row)


async def _listen(brain: Brain, conninfo: str) -> None:
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
                await conn.execute(f"LISTEN {COMMANDS_CHANNEL}")
                for events in list(brain.command_wakers.values()):
                    for event in events:
                        event.set()
                async for notice in conn.notifies():
                    try:
                        agent_id = uuid.UUID(notice.payload)
                    except ValueError:
                        continue
                    for event in brain.command_wakers.get(agent_id, ()):
                        event.set()
        except psycopg.Error:
            log.warning("command listener lost its connection; reconnecting", exc_info=True)
            await asyncio.sleep(1)


async def sweep_timeouts(brain: Brain) -> int:
    async with brain.platform_tx() as conn:
        rows = await command_store.time_out_expired(conn, datetime.now(UTC))
    for row in rows:
        log.info("command %s (%s) timed out", row["id"], row["action"])
    if rows:
        await brain.notify_change()
    return len(rows)


async def purge_http_sessions(brain: Brain) -> None:
    """Long-poll sessions idle past their lifetime, and nonces past the nonce memory."""
    async with brain.platform_tx() as conn:
        await http_session_store.purge(conn, datetime.now(UTC))


@contextlib.asynccontextmanager
async def run_commands(
    brain: Brain, conninfo: str, sweep_interval: float = 2.0
) -> AsyncIterator[None]:
    """The listener of this process, and its bid for the timeout sweeper's lock."""

    async def body(_key: LockKey) -> None:
        try:
            await sweep_timeouts(brain)
            await purge_http_sessions(brain)
        except Exception:
            log.exception("command timeout sweep failed")
        await bulk_retries.step(brain)

    listener = asyncio.create_task(_listen(brain, conninfo))
    async with LeaderLoop(conninfo, SWEEP_KEY, sweep_interval, body):
        try:
            yield
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
