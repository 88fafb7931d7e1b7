"""Who is calling an agent route, and the short cache that makes checking it cheap.

An ``AgentPrincipal`` is a verified credential plus the agent's current state. The state
(agent status and address, tenant status, the originating token's revocation and expiry) is
read once per second at most per (agent, token) and instance, so disabling an agent or revoking
a token takes effect within a second without a query on every request (04-API-SPEC §1.2).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from platformkit.db.scope import Pool

from agentbus.db import pipelined_transaction
from agentbus.gathered import Gathered
from agentbus.ids import format_id

CACHE_TTL_S = 1.0


@dataclass(frozen=True)
class AgentPrincipal:
    """The authenticated agent of a request: what routes of delivery and tasks receive."""

    tenant_id: uuid.UUID
    workspace_id: uuid.UUID
    agent_id: uuid.UUID
    key_id: uuid.UUID
    token_id: uuid.UUID
    scopes: frozenset[str]
    address: str
    owner_user_id: uuid.UUID
    visibility: str
    credential_expires_at: int

    @property
    def agent_text_id(self) -> str:
        return format_id("agt", self.agent_id)


_STATES = """SELECT q.agent_id, q.token_id AS asked_token_id, a.address, a.status::text AS status,
        a.deleted_at, a.workspace_id, a.owner_user_id, a.visibility::text AS visibility,
        n.status::text AS tenant_status, k.revoked_at AS token_revoked_at,
        k.expires_at AS token_expires_at, k.id AS token_id
    FROM unnest(%(agents)s::uuid[], %(tokens)s::uuid[]) AS q(agent_id, token_id)
    JOIN agents a ON a.tenant_id = %(t)s AND a.id = q.agent_id
    JOIN tenants n ON n.id = a.tenant_id
    LEFT JOIN integration_tokens k ON k.tenant_id = a.tenant_id AND k.id = q.token_id"""
"""The state behind several credentials of one tenant (agent, token) at once; an agent that
is gone has no row."""

StateKey = tuple[uuid.UUID, uuid.UUID]  # (agent, token)


class PrincipalCache:
    """(tenant, agent, token) -> state row, for ``CACHE_TTL_S`` seconds. Misses of one tenant
    that come together are read together (``Gathered``)."""

    def __init__(self, pool: Pool, ttl_s: float = CACHE_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._pool = pool
        self._rows: dict[tuple[uuid.UUID, uuid.UUID, uuid.UUID], tuple[float, Any]] = {}
        self.gathered: Gathered[StateKey, dict[str, Any]] = Gathered(self._read)

    async def _read(
        self, tenant_id: uuid.UUID, keys: list[StateKey]
    ) -> dict[StateKey, dict[str, Any]]:
        params = {"t": tenant_id, "agents": [a for a, _ in keys], "tokens": [k for _, k in keys]}
        async with pipelined_transaction(self._pool, tenant_id) as conn:
            rows = await (await conn.execute(_STATES, params)).fetchall()
        return {(row.pop("agent_id"), row.pop("asked_token_id")): row for row in rows}

    async def state(
        self, tenant_id: uuid.UUID, agent_id: uuid.UUID, token_id: uuid.UUID
    ) -> dict[str, Any] | None:
        key = (tenant_id, agent_id, token_id)
        now = time.monotonic()
        hit = self._rows.get(key)
        if hit is not None and hit[0] > now:
            row: dict[str, Any] | None = hit[1]
            return row
        row = await self.gathered.ask(tenant_id, (agent_id, token_id))
        if len(self._rows) > 10000:
            self._rows.clear()
        self._rows[key] = (now + self.ttl_s, row)
        return row
