"""Changing, disabling and deleting agents (04-API-SPEC §2.3).

``PATCH /v1/agents/{agt}``: the agent itself may change what it says about itself
(``SELF_FIELDS``: description, capabilities, its card's own members, harness version); a token
of the agent's owner or of an admin of its workspace may change everything, including
``status`` (``disabled``, or back to ``registered``). The card's generated members follow the
agent's fields; ``agent_card`` in the body sets the user's own members beside them. A change of
``delivery.strict_order`` brings the JetStream consumer's ``max_ack_pending`` along after the
commit (best effort: the agent's next fetch brings it up to date otherwise).

``DELETE /v1/agents/{agt}`` (owner or workspace admin): ``status = deleted``, ``deleted_at``;
the messages still waiting for it become ``discarded`` (their senders are told, and a task
request's task fails, ``outcomes.recipient_deleted``); its consumer is deleted after the
commit. Its name and address stay taken (``UNIQUE (address)``); deleting it again is AB-8002,
as for any agent that is gone.

A disabled agent's credentials stop working and sends to it are AB-3003; a deleted one is gone
from the directory and sends to it are AB-3002; on every gateway instance within a second
(``principals``, ``directory``). Each change writes an ``audit_actions`` row.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from platformkit.db.scope import Conn, tenant_transaction
from pydantic import Field

from agentbus.db import SCOPE
from agentbus.delivery import notices, outcomes
from agentbus.delivery.notices import Notes
from agentbus.errors import RequestInvalid, RoleRequired
from agentbus.gateway.actions.agent_access import check_acting, check_token_manages_agent
from agentbus.gateway.actions.agent_directory import find_visible_agent, full_agent_view
from agentbus.gateway.actions.audit import record_api_action
from agentbus.gateway.api.auth import Reader
from agentbus.gateway.api.bodies import Body
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.agent_spec import (
    GENERATED_CARD_KEYS,
    Capability,
    Delivery,
    agent_card,
    card_extra,
)
from agentbus.gateway.store import agents
from agentbus.ids import format_id
from agentbus.store.integration_tokens import VerifiedToken

log = logging.getLogger(__name__)

SELF_FIELDS = frozenset({"description", "capabilities", "agent_card", "harness_version"})
Row = dict[str, Any]


class AgentPatch(Body):
    display_name: str | None = Field(None, max_length=200)
    description: str | None = Field(None, max_length=2000)
    capabilities: list[Capability] | None = Field(None, max_length=50)
    agent_card: dict[str, Any] | None = None
    visibility: Literal["private", "workspace", "tenant", "public"] | None = None
    mode: Literal["interactive", "service"] | None = None
    delivery: Delivery | None = None
    harness_version: str | None = Field(None, max_length=100)
    status: Literal["disabled", "registered"] | None = None


def changes_of(patch: AgentPatch) -> dict[str, Any]:
    """The members the body sets, as column values (``display_name`` and ``harness_version``
    may be set to null; the rest are left alone when null)."""
    given = patch.model_dump(exclude_unset=True, mode="json")
    nullable = {"display_name", "harness_version"}
    changes = {k: v for k, v in given.items() if v is not None or k in nullable}
    extra = changes.get("agent_card")
    if extra is not None and GENERATED_CARD_KEYS & set(extra):
        taken = ", ".join(sorted(GENERATED_CARD_KEYS & set(extra)))
        raise RequestInvalid(f"agent_card may not set the generated members {taken}")
    return changes


async def _check_change(conn: Conn, who: Reader, agent: Row, fields: set[str]) -> None:
    """The agent itself for ``SELF_FIELDS``; everything for a token of its owner or of an
    admin of its workspace (AB-1008 otherwise)."""
    await check_acting(conn, who, agent, "change its description")
    if isinstance(who, AgentPrincipal) and not fields <= SELF_FIELDS:
        allowed = ", ".join(sorted(SELF_FIELDS))
        raise RoleRequired(f"an agent may change only its own {allowed}")


async def update_agent(gw: Gateway, who: Reader, agent_ref: str, patch: AgentPatch) -> Row:
    changes = changes_of(patch)
    if not changes:
        raise RequestInvalid("the body changes nothing")
    async with tenant_transaction(gw.pool, SCOPE, who.tenant_id) as conn:
        agent = await find_visible_agent(conn, who, agent_ref)
        await _check_change(conn, who, agent, set(changes))
        extra = changes.pop("agent_card", None)
        card_members = card_extra(agent["agent_card"]) | (extra or {})
        card = agent_card({**agent, **changes}, card_members)
        if card != agent["agent_card"]:  # a status change leaves the card as it is
            changes["agent_card"] = card
        updated = await agents.update_agent(conn, who.tenant_id, agent["id"], changes)
        await record_api_action(
            conn, gw, who, "agent.update", target_type="agent",
            target_id=format_id("agt", agent["id"]), details={"fields": sorted(changes)},
        )  # fmt: skip
    if agent["delivery"] != updated["delivery"]:
        await _refresh_consumer(gw, updated)
    return full_agent_view(updated)


async def delete_agent(gw: Gateway, token: VerifiedToken, agent_ref: str) -> None:
    async with tenant_transaction(gw.pool, SCOPE, token.tenant_id) as conn:
        agent = await find_visible_agent(conn, token, agent_ref)
        await check_token_manages_agent(conn, token, agent)
        await agents.mark_deleted(conn, token.tenant_id, agent["id"])
        notes: Notes = []
        discarded = await outcomes.recipient_deleted(conn, token.tenant_id, agent["id"], notes)
        await record_api_action(
            conn, gw, token, "agent.delete", target_type="agent",
            target_id=format_id("agt", agent["id"]), details={"discarded": discarded},
        )  # fmt: skip
    await notices.publish(gw.broker, notes)
    try:
        await gw.broker.delete_consumer(token.tenant_id, agent["nats_consumer"])
    except Exception as exc:  # NATS away: nobody can fetch for a deleted agent anyway
        log.warning("consumer %s of a deleted agent not removed: %s", agent["nats_consumer"], exc)


async def _refresh_consumer(gw: Gateway, agent: Row) -> None:
    try:
        await gw.broker.update_consumer(agent["tenant_id"], agent)
    except Exception as exc:
        log.warning("consumer %s not updated yet: %s", agent["nats_consumer"], exc)
