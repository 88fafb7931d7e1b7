"""Who may act on an agent: a token of its owner or of an admin of its workspace (credentials,
changes, deletion, revoking keys), or the agent itself (its own keys and self-description).
Changing, deleting and revoking also need a token scope that manages agents (``register`` or
``admin``, AB-1007): a token that only sends or receives for an agent cannot remove it."""

from __future__ import annotations

from typing import Any

from platformkit.db.scope import Conn

from agentbus.errors import RoleRequired, WorkspaceMismatch
from agentbus.gateway.api.auth import Reader, require_scopes
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.store import agents
from agentbus.store.integration_tokens import VerifiedToken


async def check_token_over_agent(conn: Conn, token: VerifiedToken, agent: dict[str, Any]) -> None:
    """An integration token acts for an agent when its owner owns the agent or is an admin of
    the agent's workspace, and the token is not bound to another workspace (AB-1015, AB-1008)."""
    if token.workspace_id is not None and token.workspace_id != agent["workspace_id"]:
        raise WorkspaceMismatch("the token is bound to another workspace")
    if agent["owner_user_id"] != token.owner_user_id:
        role = await agents.workspace_role(
            conn, token.tenant_id, agent["workspace_id"], token.owner_user_id
        )
        if role != "admin":
            raise RoleRequired("only the agent's owner or a workspace admin may do this")


MANAGE_SCOPES = ("register", "admin")


async def check_token_manages_agent(
    conn: Conn, token: VerifiedToken, agent: dict[str, Any]
) -> None:
    """``check_token_over_agent`` for a token with ``register`` or ``admin``."""
    require_scopes(token, MANAGE_SCOPES, "managing an agent")
    await check_token_over_agent(conn, token, agent)


async def check_acting(conn: Conn, who: Reader, agent: dict[str, Any], what: str) -> None:
    """The agent itself, or a managing token of its owner or of an admin of its workspace."""
    if isinstance(who, AgentPrincipal):
        if who.agent_id != agent["id"]:
            raise RoleRequired(f"an agent may {what} only for itself")
    else:
        await check_token_manages_agent(conn, who, agent)
