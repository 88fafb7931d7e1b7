"""What the brain does with an agent's ``command_ack`` and ``command_result`` frames.

Both z4j agents name the command by the frame ``id`` of their ack and result (the id of the
``command`` frame, which is the command's id); ours also puts it in ``payload.command_id``.
An id that is not one of this agent's open commands changes nothing, so a forged, late or
repeated frame is harmless. A successful ``retry_task`` links the original task to the new one
(``tasks.retried_as``).
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import Any

from platformkit.storable import find_unstorable, scrub

from z4j.brain import Brain, signal_change
from z4j.domain.commands import MAX_ERROR_CHARS, result_status
from z4j.ingest.fold import scoped_id
from z4j.store import commands as command_store

log = logging.getLogger("z4j.commands")
MAX_RESULT_CHARS = 64 * 1024


def command_id_of(frame: dict[str, Any]) -> uuid.UUID | None:
    payload = frame.get("payload")
    named = payload.get("command_id") if isinstance(payload, dict) else None
    for value in (named, frame.get("id")):
        try:
            return uuid.UUID(str(value))
        except ValueError:
            continue
    return None


async def record_ack(
    brain: Brain, project_id: uuid.UUID, agent_id: uuid.UUID, frame: dict[str, Any]
) -> None:
    command_id = command_id_of(frame)
    if command_id is None:
        return
    async with brain.project_tx(project_id) as conn:
        if await command_store.acknowledge(conn, agent_id, command_id, datetime.now(UTC)):
            await signal_change(conn)


def _bounded_result(value: Any) -> dict[str, Any] | None:
    """What of an agent's result PostgreSQL stores: NUL and lone surrogates become U+FFFD, a
    value with a non-finite number is replaced by its reason, a large one by its cut text."""
    value, _ = scrub(value)
    if not isinstance(value, dict):
        return None if value is None else {"value": str(value)[:MAX_RESULT_CHARS]}
    bad = find_unstorable(value, int_min=-(2**8192), int_max=2**8192)
    if bad is not None:
        return {"unstorable": str(bad)[:500]}
    if len(repr(value)) > MAX_RESULT_CHARS:
        return {"truncated": True, "text": repr(value)[:MAX_RESULT_CHARS]}
    return value


async def record_result(
    brain: Brain, project_id: uuid.UUID, agent_id: uuid.UUID, frame: dict[str, Any]
) -> None:
    command_id = command_id_of(frame)
    payload = frame.get("payload") or {}
    status = result_status(payload.get("status"))
    if command_id is None or status is None:
        log.warning(
            "agent %s: command_result %s without a command or status", agent_id, frame.get("id")
        )
        return
    error = payload.get("error")
    now = datetime.now(UTC)
    async with brain.project_tx(project_id) as conn:
        row = await command_store.finish(
            conn,
            agent_id,
            command_id,
            succeeded=status == "succeeded",
            result=_bounded_result(payload.get("result")),
            error=None if error is None else scrub(str(error)[:MAX_ERROR_CHARS])[0],
            now=now,
        )
        if row is None:
            return
        new_task = (row["result"] or {}).get("new_task_id") if status == "succeeded" else None
        if row["action"] == "retry_task" and row["task_id"] is not None and new_task:
            engine_id = str(new_task)[:200]
            await command_store.link_retry(
                conn, project_id, row["task_id"], scoped_id(project_id, engine_id), engine_id, now
            )
        await signal_change(conn)
