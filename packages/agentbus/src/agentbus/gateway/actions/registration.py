"""Agent registration, ``POST /v1/agents`` (04-API-SPEC §2.1).

One transaction inserts ``agents`` and ``agent_keys``; after commit the tenant stream and the
agent's JetStream consumer are created (if NATS is down, the first fetch creates them). The
same workspace, name, public key and owner again is a reinstalled sidecar: 200 with the
existing agent. Errors: AB-3006, AB-3007, AB-5006, AB-1009/1011/1012, AB-1015, AB-8001.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from platformkit.db.scope import Conn, tenant_transaction
from platformkit.ids import uuid7

from agentbus import broker
from agentbus.actions.audit import record_action
from agentbus.actions.context import Actor, Ctx
from agentbus.db import SCOPE
from agentbus.errors import NotFound, PlanLimitReached, RequestInvalid, WorkspaceMismatch
from agentbus.gateway.actions.publish import create_tenant_stream
from agentbus.gateway.api.views import agent_view, key_view
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.agent_spec import (
    NAME,
    RESERVED_NAMES,
    Registration,
    agent_card,
    fingerprint,
    public_key_of,
)
from agentbus.gateway.domain.errors import AgentNameTaken, NameReserved
from agentbus.gateway.domain.proofs import verify_key_proof
from agentbus.gateway.store import agents
from agentbus.ids import InvalidId, format_id, parse_id
from agentbus.store import plans, tenants
from agentbus.store.integration_tokens import VerifiedToken

log = logging.getLogger(__name__)

KEY_LIFETIME = timedelta(days=90)


@dataclass(frozen=True)
class Registered:
    body: dict[str, Any]
    created: bool


async def _workspace(conn: Conn, token: VerifiedToken, ref: str | None) -> dict[str, Any]:
    tid = token.tenant_id
    if ref is None:
        if token.workspace_id is None:
            raise RequestInvalid(
                "workspace is required with a tenant-wide token", field="workspace"
            )
        ref = format_id("ws", token.workspace_id)
    if ref.startswith("ws_"):
        try:
            row = await agents.workspace_by_id(conn, tid, parse_id("ws", ref))
        except InvalidId as exc:
            raise RequestInvalid("not a workspace id", field="workspace") from exc
    else:
        row = await agents.workspace_by_slug(conn, tid, ref)
    if row is None or row["deleted_at"] is not None:
        raise NotFound(f"no workspace {ref}", field="workspace")
    if token.workspace_id is not None and row["id"] != token.workspace_id:
        raise WorkspaceMismatch("the token is bound to another workspace")
    return row


async def register_agent(gw: Gateway, token: VerifiedToken, reg: Registration) -> Registered:
    if not NAME.match(reg.name):
        raise RequestInvalid("a name is 3 to 40 of a-z, 0-9 and '-'", field="name")
    if reg.name in RESERVED_NAMES:
        raise NameReserved(f"the name {reg.name!r} is reserved")
    raw_key, public = public_key_of(reg.public_key)
    tid = token.tenant_id
    try:
        async with tenant_transaction(gw.pool, SCOPE, tid) as conn:
            tenant = await tenants.get_tenant(conn, tid)
            assert tenant is not None  # the token was just verified in this tenant
            ws = await _workspace(conn, token, reg.workspace)
            address = f"agent://{tenant['slug']}/{ws['slug']}/{reg.name}"
            verify_key_proof(reg.proof, public, subject=address, replay=gw.proofs)
            existing = await agents.agent_by_name(conn, tid, ws["id"], reg.name)
            if existing is not None:
                return await _reinstall(conn, existing, token, raw_key)
            limits = await plans.effective_limits(conn, tid)
            limit = limits.get("agents")
            if limit is not None and await agents.count_live_agents(conn, tid) >= limit:
                raise PlanLimitReached(f"the plan allows {limit} agents", limit="agents")
            agent, key = await _insert(conn, tenant, ws, token, reg, address, raw_key)
            ctx = Ctx(gw.pool, Actor.user(tid, token.owner_user_id))
            await record_action(
                conn, ctx, tid, "agent.register", target_type="agent",
                target_id=format_id("agt", agent["id"]), details={"address": address},
            )  # fmt: skip
    except psycopg.errors.UniqueViolation as exc:
        raise AgentNameTaken(f"the name {reg.name!r} is taken in this workspace") from exc
    await prepare_delivery(gw, tenant, agent, stream_bytes=limits.get("stream_bytes"))
    return Registered({"agent": agent_view(agent), "key": key_view(key)}, created=True)


async def _reinstall(
    conn: Conn, existing: dict[str, Any], token: VerifiedToken, raw_key: bytes
) -> Registered:
    key = await agents.key_by_public_key(conn, token.tenant_id, existing["id"], raw_key)
    if key is None or existing["owner_user_id"] != token.owner_user_id or existing["deleted_at"]:
        raise AgentNameTaken(f"the name {existing['name']!r} is taken in this workspace")
    return Registered({"agent": agent_view(existing), "key": key_view(key)}, created=False)


async def _insert(
    conn: Conn,
    tenant: dict[str, Any],
    ws: dict[str, Any],
    token: VerifiedToken,
    reg: Registration,
    address: str,
    raw_key: bytes,
) -> tuple[dict[str, Any], dict[str, Any]]:
    tid, agent_id, key_id = tenant["id"], uuid7(), uuid7()
    values: dict[str, Any] = {
        "id": agent_id,
        "workspace_id": ws["id"],
        "owner_user_id": token.owner_user_id,
        "name": reg.name,
        "address": address,
        "display_name": reg.display_name,
        "description": reg.description,
        "capabilities": [c.model_dump() for c in reg.capabilities],
        "harness": reg.harness,
        "harness_version": reg.harness_version,
        "mode": reg.mode,
        "visibility": reg.visibility,
        "nats_consumer": broker.consumer_name(agent_id),
        "inbox_subject": broker.inbox_subject(tid, ws["id"], agent_id),
        "delivery": reg.delivery.model_dump(),
        "last_host": reg.host,
    }
    values["agent_card"] = agent_card(values)
    agent = await agents.insert_agent(conn, tid, values)
    spiffe = (
        f"spiffe://{tenant['slug']}.agentbus.exchange/ws/{format_id('ws', ws['id'])}"
        f"/agent/{format_id('agt', agent_id)}"
    )
    key = await agents.insert_key(
        conn,
        tid,
        key_id=key_id,
        agent_id=agent_id,
        public_key=raw_key,
        fingerprint=fingerprint(raw_key),
        spiffe_id=spiffe,
        expires_at=datetime.now(UTC) + KEY_LIFETIME,
    )
    return agent, key


async def prepare_delivery(
    gw: Gateway, tenant: dict[str, Any], agent: dict[str, Any], *, stream_bytes: int | None
) -> None:
    """After commit: the tenant stream and the agent's consumer; best effort (05 §2.3)."""
    try:
        await create_tenant_stream(gw, tenant, stream_bytes)
        await gw.broker.ensure_consumer(tenant["id"], agent)
    except Exception as exc:  # NATS down: the agent's first fetch creates the consumer
        log.warning("consumer for %s not created yet: %s", agent["nats_consumer"], exc)
