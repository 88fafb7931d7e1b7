"""Agent presence (04-API-SPEC §9): ``POST /v1/agents/{agt}/heartbeat`` and the
``reconcile.presence`` sweep (data model §1.11, 05 §12).

A heartbeat comes from the agent's own sidecar (every 30 s) and sets ``agents.status`` to the
reported ``online`` or ``idle``, ``last_seen_at``, and the ``harness_version`` and ``last_host``
it names. An agent may heartbeat only itself: any other id in the path, like a malformed one, is
AB-8002. A disabled or deleted agent is refused by authentication (AB-1014).

Decision: the heartbeat writes the ``agents`` row directly rather than a NATS KV entry mirrored
by the sweep; one small update per agent per 30 s is cheap, and PostgreSQL then holds presence
even while NATS is away. The sweep keeps the TTL semantics: every 30 s (one leader per shard)
agents ``online`` or ``idle`` not seen for 90 s become ``offline``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Literal

from platformkit.db.scope import tenant_transaction, transaction
from platformkit.jobs import LeaderLoop, LockKey, shard_keys
from pydantic import Field

from agentbus.db import SCOPE
from agentbus.errors import NotFound
from agentbus.gateway.api.bodies import Body
from agentbus.gateway.api.principals import AgentPrincipal
from agentbus.gateway.context import Gateway
from agentbus.gateway.domain.errors import AgentDisabled
from agentbus.gateway.store import agents
from agentbus.ids import InvalidId, parse_id

LOOP_NAME = "agentbus.reconcile.presence"
PRESENCE_TTL = timedelta(seconds=90)
SWEEP_EVERY_S = 30.0


class Heartbeat(Body):
    status: Literal["online", "idle"]
    harness_version: str | None = Field(default=None, min_length=1, max_length=100)
    host: str | None = Field(default=None, min_length=1, max_length=255)


async def heartbeat(gw: Gateway, who: AgentPrincipal, agent_ref: str, body: Heartbeat) -> None:
    try:
        agent_id = parse_id("agt", agent_ref)
    except InvalidId:
        agent_id = None
    if agent_id != who.agent_id:
        raise NotFound(f"no agent {agent_ref} this credential may report for")
    async with tenant_transaction(gw.pool, SCOPE, who.tenant_id) as conn:
        seen = await agents.record_heartbeat(
            conn, who.tenant_id, who.agent_id,
            status=body.status, harness_version=body.harness_version, host=body.host,
        )  # fmt: skip
    if not seen:  # disabled or deleted since the credential check's cached state
        raise AgentDisabled("the agent is disabled or deleted")


async def sweep(
    gw: Gateway, *, shard: int = 0, shards: int = 1, now: datetime | None = None
) -> int:
    """One pass over the shard's tenants; how many agents went ``offline``."""
    seen_before = (now or datetime.now(UTC)) - PRESENCE_TTL
    async with transaction(gw.pool) as conn:
        cur = await conn.execute(
            "SELECT id FROM platform_tenants() WHERE status IN ('active', 'suspended')"
        )
        tenants: list[uuid.UUID] = [r["id"] for r in await cur.fetchall()]
    offline = 0
    for tenant_id in (t for t in tenants if t.int % shards == shard):
        async with tenant_transaction(gw.pool, SCOPE, tenant_id) as conn:
            offline += await agents.mark_offline(conn, tenant_id, seen_before)
    return offline


def presence_loop(gw: Gateway) -> LeaderLoop:
    shards = gw.settings.reconcile_shards

    async def body(key: LockKey) -> None:
        await sweep(gw, shard=key[1], shards=shards)

    return LeaderLoop(gw.pool, shard_keys(LOOP_NAME, shards), SWEEP_EVERY_S, body)
