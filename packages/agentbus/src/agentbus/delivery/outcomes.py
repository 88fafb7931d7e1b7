"""Status changes of one message and their consequences for its task, inside the caller's
transaction (tenant scope). Shared by the pull, the ack and read handlers, the sweeper and the
DLQ worker, so each fact is written the same way whoever learns it first.

Each change can note a status notification for the sender (``notices``), which the caller
publishes after its commit. Task consequences (conventions §4): a transport-acked request
delivers its task; an expired request expires a task still ``submitted``/``delivered``
(AB-6010); a dead-lettered request, or one whose recipient was deleted, fails its task
(AB-6011).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn

from agentbus.delivery import store
from agentbus.delivery.domain import Status
from agentbus.delivery.notices import Notes, note
from agentbus.tasks import actions as tasks
from agentbus.tasks.domain import OPEN, REQUEST_TYPE, Event, State

Row = dict[str, Any]
_UNANSWERED = frozenset({State.SUBMITTED, State.DELIVERED})


async def _task_event(
    conn: Conn, tenant_id: uuid.UUID, row: Row, event: Event, reason: str | None = None
) -> None:
    if row["type"] != REQUEST_TYPE:
        return
    only = _UNANSWERED if event is Event.EXPIRE else OPEN
    await tasks.system_event(
        conn, tenant_id, row["id"], event, by_msg_id=row["id"], reason=reason, only_from=only
    )


async def acknowledge(
    conn: Conn,
    tenant_id: uuid.UUID,
    rows: Sequence[Row],
    to: Status,
    read_ats: Sequence[datetime | None],
    notes: Notes | None = None,
) -> set[uuid.UUID]:
    """Transport acks (``fetched -> delivered``, ``transport_acked_at``) or application acks
    (``delivered | fetched -> read``, ``read_at`` from ``read_ats``; from ``fetched`` the
    transport ack is filled in too) of a batch of locked rows, each to its own recipient, in one
    statement. Returns the ids that moved; the others are past that (already delivered, read
    or terminal). A task request that moved out of ``fetched`` delivers its task."""
    moved = await store.ack_many(conn, tenant_id, rows, to, read_ats)
    for row in rows:
        if row["id"] not in moved:
            continue
        note(notes, row, to)
        if to is Status.DELIVERED or row["status"] == Status.FETCHED:
            await _task_event(conn, tenant_id, row, Event.DELIVERED)
    return moved


async def expire(conn: Conn, tenant_id: uuid.UUID, row: Row, notes: Notes | None = None) -> bool:
    if not await store.move(conn, tenant_id, row, Status.EXPIRED):
        return False
    note(notes, row, Status.EXPIRED)
    await _task_event(conn, tenant_id, row, Event.EXPIRE, "request expired undelivered")
    return True


async def dead_letter(
    conn: Conn, tenant_id: uuid.UUID, row: Row, reason: str, notes: Notes | None = None
) -> bool:
    """``accepted | fetched -> dead_lettered`` with ``delivery_state.dlq_reason``."""
    if not await store.move(conn, tenant_id, row, Status.DEAD_LETTERED):
        return False
    note(notes, row, Status.DEAD_LETTERED)
    if row["to_agent_id"] is not None:
        await store.record(
            conn, tenant_id, row["id"], row["to_agent_id"], "dead_letter", reason=reason
        )
    await _task_event(conn, tenant_id, row, Event.DEAD_LETTER, reason)
    return True


async def discard(
    conn: Conn,
    tenant_id: uuid.UUID,
    row: Row,
    notes: Notes | None = None,
    denied_by: tuple[uuid.UUID | None] | None = None,
) -> bool:
    """``accepted | fetched -> discarded``: its sender or recipient gone, or ``denied_by`` the
    policies in force at delivery (the policy that denied it, if one did), which its event
    records with the code AB-4004."""
    if denied_by is None:
        moved = await store.move(conn, tenant_id, row, Status.DISCARDED)
    else:
        (policy_id,) = denied_by
        await conn.execute(_EVENT_CAUSE, (POLICY_DENIED_AT_DELIVERY, str(policy_id or "")))
        moved = await store.move(conn, tenant_id, row, Status.DISCARDED)
        await conn.execute(_EVENT_CAUSE, ("", ""))
    if not moved:
        return False
    note(notes, row, Status.DISCARDED)
    return True


# What the event trigger of migration 0016 writes as a discard's error_code and policy_id.
_EVENT_CAUSE = """SELECT set_config('agentbus.event_error', %s, true),
                         set_config('agentbus.event_policy', %s, true)"""
POLICY_DENIED_AT_DELIVERY = "AB-4004"


async def recipient_deleted(
    conn: Conn, tenant_id: uuid.UUID, agent_id: uuid.UUID, notes: Notes | None = None
) -> int:
    """What still waits for a deleted agent is ``discarded``; a task request among it can no
    longer be delivered, so its task fails (AB-6011) as for a dead-lettered request. The number
    of messages discarded."""
    rows = await store.discard_waiting(conn, tenant_id, agent_id)
    for row in rows:
        note(notes, row, Status.DISCARDED)
        await _task_event(conn, tenant_id, row, Event.DEAD_LETTER, "the recipient was deleted")
    return len(rows)


async def nak(
    conn: Conn, tenant_id: uuid.UUID, agent_id: uuid.UUID, row: Row, delay_ms: int
) -> None:
    await store.record(conn, tenant_id, row["id"], agent_id, "nak", delay_ms=delay_ms)
