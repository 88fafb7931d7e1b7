"""The ``audit_actions`` row of an action taken through the API (data model §1.9): the acting
user is the agent's owner for an agent credential, the token's owner for an integration token;
``details.via`` says which (``agent`` or the ``tok_`` id)."""

from __future__ import annotations

from typing import Any

from platformkit.db.scope import Conn

from agentbus.actions.audit import record_action
from agentbus.actions.context import Actor, Ctx
from agentbus.gateway.api.auth import Reader
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.context import Gateway
from agentbus.ids import format_id


async def record_api_action(
    conn: Conn,
    gw: Gateway,
    who: Reader,
    action: str,
    *,
    target_type: str,
    target_id: str,
    details: dict[str, Any] | None = None,
    client: tuple[str | None, str | None] = (None, None),
) -> None:
    """In the action's transaction; ``client``: the caller's address and user agent."""
    if isinstance(who, AgentPrincipal):
        via = "agent"
    else:  # a console session acts as its user, without a token (console.pages.console_token)
        via = "console" if who.env == "console" else format_id("tok", who.token_id)
    ctx = Ctx(gw.pool, Actor.user(who.tenant_id, who.owner_user_id), ip=client[0],
              user_agent=client[1])  # fmt: skip
    await record_action(
        conn, ctx, who.tenant_id, action, target_type=target_type, target_id=target_id,
        details={**(details or {}), "via": via},
    )  # fmt: skip
