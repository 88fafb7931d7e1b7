"""Conversations: joined by the send path (04-API-SPEC §4.1 step 8) and read by agents (§7).

The first message carrying a new ``conversation`` id creates the row (``started_by`` = sender,
the sender's workspace, ``title`` from ``data.title``). An existing one must be in the sender's
tenant (an id taken in another tenant is AB-2019, never revealed) and in the workspace of the
sender or the recipient (AB-2019), and must list the sender as a participant (AB-3005).
Participants, counts and ``last_message_at`` are the trigger's; nothing here writes them.
"""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn, tenant_transaction

from agentbus.db import SCOPE
from agentbus.errors import NotFound
from agentbus.gateway.actions.addressing import Sender
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.api.views import conversation_view, message_view
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain import cursors
from agentbus.gateway.domain.errors import ConversationConflict, NotAParticipant
from agentbus.gateway.store import conversations as store
from agentbus.gateway.store import messages
from agentbus.ids import InvalidId, parse_id

MAX_LIMIT = 200
CURSOR_KIND = "cm"


def admit(row: dict[str, Any], sender: Sender, recipient: dict[str, Any]) -> dict[str, Any]:
    """An existing conversation this send may join: in the sender's or the recipient's
    workspace (AB-2019), with the sender among its participants (AB-3005)."""
    if row["workspace_id"] not in (sender.workspace_id, recipient["workspace_id"]):
        raise ConversationConflict("the conversation belongs to another workspace")
    if sender.agent_id not in row["participants"]:
        raise NotAParticipant("the sender is not a participant of this conversation")
    return row


async def join_conversation(
    conn: Conn,
    conversation_id: uuid.UUID,
    sender: Sender,
    recipient: dict[str, Any],
    title: str | None,
) -> dict[str, Any]:
    """The conversation the message joins, created if the id is new (in the write
    transaction), after the checks of ``admit``. The caller found no row under the id when it
    claimed the message ids (``send._claim``), so the insert comes first: one round trip for a
    new conversation; a twin created since (its transaction committed meanwhile) is read."""
    tid = sender.tenant_id
    created = await store.insert_conversation(
        conn, tid, conversation_id, workspace_id=sender.workspace_id,
        started_by=sender.agent_id, title=title,
    )  # fmt: skip
    if created is not None:
        return created
    row = await store.get_conversation(conn, tid, conversation_id)
    if row is None:
        raise ConversationConflict("the conversation id belongs to another tenant")
    return admit(row, sender, recipient)


def _conversation_id(text: str) -> uuid.UUID:
    try:
        return parse_id("cnv", text)
    except InvalidId as exc:
        raise NotFound(f"no conversation {text}") from exc


async def _visible(conn: Conn, principal: AgentPrincipal, text: str) -> dict[str, Any]:
    row = await store.get_conversation(conn, principal.tenant_id, _conversation_id(text))
    if row is None or principal.agent_id not in row["participants"]:
        raise NotFound(f"no conversation {text}")
    return row


async def read_conversation(gw: Gateway, principal: AgentPrincipal, text: str) -> dict[str, Any]:
    async with tenant_transaction(gw.pool, SCOPE, principal.tenant_id) as conn:
        row = await _visible(conn, principal, text)
        names = await store.addresses_of(conn, principal.tenant_id, list(row["participants"]))
    return conversation_view(row, [names[a] for a in row["participants"] if a in names])


async def list_conversations(
    gw: Gateway, principal: AgentPrincipal, limit: int = 50
) -> dict[str, Any]:
    tid = principal.tenant_id
    async with tenant_transaction(gw.pool, SCOPE, tid) as conn:
        rows = await store.list_for_participant(
            conn, tid, principal.agent_id, limit=max(1, min(limit, MAX_LIMIT))
        )
        everyone = list({a for r in rows for a in r["participants"]})
        names = await store.addresses_of(conn, tid, everyone)
    items = [
        conversation_view(r, [names[a] for a in r["participants"] if a in names]) for r in rows
    ]
    return {"items": items, "next_cursor": None}


async def list_conversation_messages(
    gw: Gateway, principal: AgentPrincipal, text: str, *, limit: int = 50, cursor: str | None = None
) -> dict[str, Any]:
    """Message metadata, oldest first, a page at a time."""
    tid = principal.tenant_id
    limit, after = max(1, min(limit, MAX_LIMIT)), cursors.decode(CURSOR_KIND, cursor)
    async with tenant_transaction(gw.pool, SCOPE, tid) as conn:
        row = await _visible(conn, principal, text)
        rows = await messages.conversation_messages(conn, tid, row["id"], after=after, limit=limit)
    next_cursor = cursors.after_page(CURSOR_KIND, rows, limit)
    return {"items": [message_view(r) for r in rows], "next_cursor": next_cursor}
