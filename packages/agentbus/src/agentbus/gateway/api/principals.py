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

from platformkit.db.scope import Pool, tenant_transaction

from agentbus.db import SCOPE
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


_STATE = """SELECT a.address, a.status::text AS status, a.deleted_at, a.workspace_id,
        a.owner_user_id, a.visibility::text AS visibility, n.status::text AS tenant_status,
        k.revoked_at AS token_revoked_at, k.expires_at AS token_expires_at, k.id AS token_id
    FROM agents a JOIN tenants n ON n.id = a.tenant_id
    LEFT JOIN integration_tokens k ON k.tenant_id = a.tenant_id AND k.id = %s
    WHERE a.tenant_id = %s AND a.id = %s"""


class PrincipalCache:
    """(tenant, agent, token) -> state row, for ``CACHE_TTL_S`` seconds."""

    def __init__(self, ttl_s: float = CACHE_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._rows: dict[tuple[uuid.UUID, uuid.UUID, uuid.UUID], tuple[float, Any]] = {}

    async def state(
        self, pool: Pool, tenant_id: uuid.UUID, agent_id: uuid.UUID, token_id: uuid.UUID
    ) -> dict[str, Any] | None:
        key = (tenant_id, agent_id, token_id)
        now = time.monotonic()
        hit = self._rows.get(key)
        if hit is not None and hit[0] > now:
            row: dict[str, Any] | None = hit[1]
            return row
        async with tenant_transaction(pool, SCOPE, tenant_id) as conn:
            row = await (await conn.execute(_STATE, (token_id, tenant_id, agent_id))).fetchone()
        if len(self._rows) > 10000:
            self._rows.clear()
        self._rows[key] = (now + self.ttl_s, row)
        return row

    def forget(self, tenant_id: uuid.UUID, agent_id: uuid.UUID) -> None:
        """Drop the cached state of an agent (after this instance changed it)."""
        for key in [k for k in self._rows if k[0] == tenant_id and k[1] == agent_id]:
            del self._rows[key]
