"""The fleet's NOTIFY channel: replicas drop cached credentials and agent state when a row they
cache changes. NOTIFY is transactional, so a notice is delivered only if the change commits.

Payloads: ``agent:<tenant>:<agent>`` (one agent's state), ``tenant:<tenant>`` (every agent of
the tenant), ``agents:<tenant>:<first>:<last>`` (the agents whose ids are in that range: one
batch of the reconciler), ``credential:<sha256 hex>`` (a revoked credential),
``release:<tenant>`` (the release pointer moved: reconcile now),
``served:<tenant>:<artifact hex>:<agent>,<agent>...`` (agents fetched that artifact: caches
update in place, no reload).
"""

from __future__ import annotations

from uuid import UUID

from platformkit.db.scope import Conn

CHANNEL = "strataplane_fleet"


async def notify(conn: Conn, payload: str) -> None:
    await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))


async def agent_changed(conn: Conn, tenant_id: UUID, agent_id: UUID) -> None:
    await notify(conn, f"agent:{tenant_id}:{agent_id}")


async def tenant_changed(conn: Conn, tenant_id: UUID) -> None:
    await notify(conn, f"tenant:{tenant_id}")


async def agents_changed(conn: Conn, tenant_id: UUID, first: UUID, last: UUID) -> None:
    """Agents of the tenant with ids from ``first`` to ``last`` (inclusive) changed."""
    await notify(conn, f"agents:{tenant_id}:{first}:{last}")


async def credentials_revoked(conn: Conn, hashes: list[bytes]) -> None:
    for digest in hashes:
        await notify(conn, f"credential:{digest.hex()}")


async def served(conn: Conn, tenant_id: UUID, artifact: bytes, agents: list[UUID]) -> None:
    """In chunks that keep each payload under NOTIFY's 8000 bytes."""
    for start in range(0, len(agents), 150):
        ids = ",".join(str(a) for a in agents[start : start + 150])
        await notify(conn, f"served:{tenant_id}:{artifact.hex()}:{ids}")


async def release_moved(conn: Conn, tenant_id: UUID) -> None:
    await notify(conn, f"release:{tenant_id}")
