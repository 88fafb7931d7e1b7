"""Finding agents (04-API-SPEC §2.2): the directory ``GET /v1/agents``, one agent ``GET
/v1/agents/{agt}`` and its card ``GET /v1/agents/{agt}/card``.

An agent caller sees what conventions §2 lets it address (``addressing.visible``: another
owner's private agents never, workspace-visible agents of its own workspace only) and itself;
an integration token of any scope sees its tenant's agents, or its workspace's for a token
bound to one. Deleted agents are gone. What the caller may not see is AB-8002, exactly as what
does not exist.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from platformkit.db.scope import Conn, tenant_transaction

from agentbus.a2a import cards
from agentbus.db import SCOPE
from agentbus.errors import NotFound, RequestInvalid
from agentbus.gateway.actions.addressing import Sender, visible
from agentbus.gateway.api.auth import Reader
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.api.views import agent_view, ts
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain import cursors
from agentbus.gateway.domain.agent_spec import CAPABILITY
from agentbus.gateway.store import agents
from agentbus.ids import InvalidId, parse_id

LIST_MAX = 200
LIST_CURSOR = "ag"
STATUSES = ("registered", "online", "idle", "offline", "disabled")
Row = dict[str, Any]


def viewer_of(who: Reader) -> agents.Viewer:
    if isinstance(who, AgentPrincipal):
        return agents.Viewer(who.workspace_id, who.agent_id, who.owner_user_id)
    return agents.Viewer(who.workspace_id)


async def find_visible_agent(conn: Conn, who: Reader, agent_ref: str) -> Row:
    """The live agent ``agent_ref`` if ``who`` may see it; AB-8002 otherwise."""
    try:
        agent_id = parse_id("agt", agent_ref)
    except InvalidId as exc:
        raise NotFound(f"no agent {agent_ref}") from exc
    agent = await agents.get_agent(conn, who.tenant_id, agent_id)
    if agent is None or agent["deleted_at"] is not None:
        raise NotFound(f"no agent {agent_ref}")
    if isinstance(who, AgentPrincipal):
        sender = Sender(who.tenant_id, who.agent_id, who.workspace_id, who.owner_user_id)
        seen = who.agent_id == agent_id or visible(agent, sender)
    else:
        seen = who.workspace_id in (None, agent["workspace_id"])
    if not seen:
        raise NotFound(f"no agent {agent_ref}")
    return agent


def full_agent_view(agent: Row) -> dict[str, Any]:
    return {
        **agent_view(agent),
        "last_seen_at": ts(agent["last_seen_at"]),
        "agent_card": agent["agent_card"],
    }


async def read_agent(gw: Gateway, who: Reader, agent_ref: str) -> dict[str, Any]:
    async with tenant_transaction(gw.pool, SCOPE, who.tenant_id) as conn:
        return full_agent_view(await find_visible_agent(conn, who, agent_ref))


async def read_card(gw: Gateway, who: Reader, agent_ref: str, base: str) -> dict[str, Any]:
    """The agent's A2A card (``a2a.cards``), its interface under ``base``."""
    async with tenant_transaction(gw.pool, SCOPE, who.tenant_id) as conn:
        agent = await find_visible_agent(conn, who, agent_ref)
    return cards.agent_card(agent, base)


async def _workspace_filter(conn: Conn, tenant_id: uuid.UUID, ref: str | None) -> uuid.UUID | None:
    """A ``ws_`` id or a slug; a slug no workspace has matches nothing (a fresh id)."""
    if ref is None:
        return None
    if ref.startswith("ws_"):
        try:
            return parse_id("ws", ref)
        except InvalidId as exc:
            raise RequestInvalid("workspace takes a ws_ id or a slug", field="workspace") from exc
    row = await agents.workspace_by_slug(conn, tenant_id, ref)
    return uuid.uuid4() if row is None else row["id"]


async def list_directory(
    gw: Gateway,
    who: Reader,
    *,
    workspace: str | None = None,
    capability: str | None = None,
    status: str | None = None,
    q: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    """``GET /v1/agents``: the agents the caller may see, oldest first, a page at a time."""
    if status is not None and status not in STATUSES:
        raise RequestInvalid(f"status takes one of {', '.join(STATUSES)}", field="status")
    if capability is not None and not re.fullmatch(CAPABILITY, capability):
        raise RequestInvalid("capability takes a capability name", field="capability")
    if q is not None and len(q) > 100:
        raise RequestInvalid("q is at most 100 characters", field="q")
    limit, after = max(1, min(limit, LIST_MAX)), cursors.decode(LIST_CURSOR, cursor)
    async with tenant_transaction(gw.pool, SCOPE, who.tenant_id) as conn:
        filters = {
            "workspace_id": await _workspace_filter(conn, who.tenant_id, workspace),
            "status": status, "capability": capability, "q": q,
        }  # fmt: skip
        rows = await agents.list_agents(
            conn, who.tenant_id, viewer_of(who), filters=filters, after=after, limit=limit
        )
    return {
        "items": [full_agent_view(row) for row in rows],
        "next_cursor": cursors.after_page(LIST_CURSOR, rows, limit, at="created_at"),
    }
