"""Task requests (04-API-SPEC.md §6.1), inside the send path's transactions: a request under
an existing (recipient, idempotency key) is a duplicate when capability, version and payload
digest are equal (the original task is answered, nothing is stored), AB-6002 otherwise; a new
one inserts the ``submitted`` task (id = the request's id) and its first transition.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb

from agentbus.ids import format_id
from agentbus.tasks import store
from agentbus.tasks.domain import State
from agentbus.tasks.errors import IdempotencyConflict

Row = dict[str, Any]


@dataclass(frozen=True)
class Duplicate:
    """The task an earlier request with the same (recipient, key) created (04 §6.1)."""

    task: Row

    @property
    def request_msg_id(self) -> uuid.UUID:
        value = self.task["request_msg_id"]
        assert isinstance(value, uuid.UUID)
        return value


class DuplicateTaskRequest(Exception):
    """``create_task`` lost a race to a concurrent identical request: roll back the transaction
    and answer the replay of ``duplicate``."""

    def __init__(self, duplicate: Duplicate) -> None:
        super().__init__(format_id("tsk", duplicate.task["id"]))
        self.duplicate = duplicate


async def find_duplicate(
    conn: Conn,
    tenant_id: uuid.UUID,
    *,
    recipient: uuid.UUID,
    idempotency_key: str,
    capability: str,
    capability_ver: str,
    payload_sha256: bytes,
) -> Duplicate | None:
    existing = await store.get_by_key(conn, tenant_id, recipient, idempotency_key)
    if existing is None:
        return None
    same = (
        existing["capability"] == capability
        and existing["capability_ver"] == capability_ver
        and existing["request_sha256"] == payload_sha256
    )
    if not same:
        task_id = format_id("tsk", existing["id"])
        raise IdempotencyConflict(
            f"idempotency key {idempotency_key!r} already names task {task_id}", task_id=task_id
        )
    return Duplicate(existing)


async def create_task(
    conn: Conn,
    tenant_id: uuid.UUID,
    *,
    msg_id: uuid.UUID,
    workspace_id: uuid.UUID,
    conversation_id: uuid.UUID,
    requester: uuid.UUID,
    recipient: uuid.UUID,
    idempotency_key: str,
    capability: str,
    capability_ver: str,
    payload_sha256: bytes,
    budget: dict[str, str] | None = None,
    expires_at: datetime | None = None,
) -> Row:
    """Insert the ``submitted`` task (id = the request's id) and its first transition."""
    row = await store.insert_task(
        conn,
        tenant_id,
        id=msg_id,
        workspace_id=workspace_id,
        conversation_id=conversation_id,
        request_msg_id=msg_id,
        requester_agent_id=requester,
        recipient_agent_id=recipient,
        idempotency_key=idempotency_key,
        capability=capability,
        capability_ver=capability_ver,
        budget=None if budget is None else Jsonb(budget),
        expires_at=expires_at,
    )
    if row is None:
        duplicate = await find_duplicate(
            conn,
            tenant_id,
            recipient=recipient,
            idempotency_key=idempotency_key,
            capability=capability,
            capability_ver=capability_ver,
            payload_sha256=payload_sha256,
        )
        if duplicate is None:  # the id itself exists: a replay the send path handles earlier
            raise IdempotencyConflict(f"task {format_id('tsk', msg_id)} already exists")
        raise DuplicateTaskRequest(duplicate)
    await store.insert_transition(conn, tenant_id, msg_id, None, State.SUBMITTED, by_msg_id=msg_id)
    return row


def concurrent_duplicate(duplicate: Duplicate) -> IdempotencyConflict:
    """What a request answers when an identical one under the same key committed between its
    checks and its insert: a repeat of the send is then answered as a duplicate (200)."""
    task_id = format_id("tsk", duplicate.task["id"])
    return IdempotencyConflict(
        f"a concurrent request with the same key created {task_id}; repeat to receive it",
        task_id=task_id,
        duplicate_of=format_id("msg", duplicate.request_msg_id),
    )
