"""Task reads for the parties (04-API-SPEC.md §6.2): ``access_task`` answers AB-6001 for a task
of another tenant, a task the caller is no party to, or an id that is not a ``tsk_`` id, so
nothing distinguishes "absent" from "not yours"."""

from __future__ import annotations

import json
import uuid
from typing import Any

from platformkit import boundedjson
from platformkit.db.scope import Conn, Pool, tenant_transaction

from agentbus.db import SCOPE
from agentbus.errors import RequestInvalid
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.domain.errors import CursorInvalid
from agentbus.gateway.domain.wire import b64url_decode, b64url_encode
from agentbus.ids import InvalidId, parse_id
from agentbus.tasks import store
from agentbus.tasks.domain import State
from agentbus.tasks.errors import TaskNotFound
from agentbus.tasks.render import task_view, transition_view

Row = dict[str, Any]
MAX_LIMIT = 200
ROLES = ("requester", "recipient")


async def access_task(conn: Conn, who: AgentPrincipal, text_id: str) -> Row:
    try:
        task_id = parse_id("tsk", text_id)
    except InvalidId:
        raise TaskNotFound(f"no task {text_id}") from None
    task = await store.get_task(conn, who.tenant_id, task_id)
    if task is None or who.agent_id not in (task["requester_agent_id"], task["recipient_agent_id"]):
        raise TaskNotFound(f"no task {text_id}")
    return task


async def _view(conn: Conn, who: AgentPrincipal, rows: list[Row]) -> list[dict[str, Any]]:
    ids = [r[c] for r in rows for c in ("requester_agent_id", "recipient_agent_id")]
    names = await store.addresses(conn, who.tenant_id, ids)
    return [task_view(r, names) for r in rows]


async def read_task(pool: Pool, who: AgentPrincipal, text_id: str) -> dict[str, Any]:
    async with tenant_transaction(pool, SCOPE, who.tenant_id) as conn:
        task = await access_task(conn, who, text_id)
        return (await _view(conn, who, [task]))[0]


async def read_transitions(pool: Pool, who: AgentPrincipal, text_id: str) -> list[dict[str, Any]]:
    async with tenant_transaction(pool, SCOPE, who.tenant_id) as conn:
        task = await access_task(conn, who, text_id)
        rows = await store.list_transitions(conn, who.tenant_id, task["id"])
    return [transition_view(r) for r in rows]


def _cursor(task_id: uuid.UUID) -> str:
    return b64url_encode(json.dumps(["tk", task_id.hex]).encode())


def _before(cursor: str | None) -> uuid.UUID | None:
    if cursor is None:
        return None
    try:
        kind, hex_id = boundedjson.loads(b64url_decode(cursor), max_depth=1, max_bytes=512)
        if kind != "tk":
            raise ValueError(kind)
        return uuid.UUID(hex=hex_id)
    except (ValueError, TypeError) as exc:
        raise CursorInvalid("this cursor was not made by this endpoint") from exc


async def list_tasks(
    pool: Pool,
    who: AgentPrincipal,
    *,
    role: str | None = None,
    state: str | None = None,
    capability: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    """The caller's tasks, newest first, a page at a time (04 §1.5)."""
    if role is not None and role not in ROLES:
        raise RequestInvalid("role is requester or recipient", field="role")
    if state is not None and state not in {s.value for s in State}:
        raise RequestInvalid("unknown task state", field="state")
    if not 1 <= limit <= MAX_LIMIT:
        raise RequestInvalid(f"limit must be 1 to {MAX_LIMIT}", field="limit")
    async with tenant_transaction(pool, SCOPE, who.tenant_id) as conn:
        rows = await store.list_tasks(
            conn, who.tenant_id, who.agent_id, role=role, state=state, capability=capability,
            before=_before(cursor), limit=limit + 1,
        )  # fmt: skip
        items = await _view(conn, who, rows[:limit])
    more = len(rows) > limit
    return {"items": items, "next_cursor": _cursor(rows[limit - 1]["id"]) if more else None}
