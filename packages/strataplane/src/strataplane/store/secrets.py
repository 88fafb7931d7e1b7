"""secret_version (the versions of each Secret name) and secret_delivery (every delivery of a
version to an agent). Values live in sealed_value (store/sealed.py); nothing here reads them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.store.rows import one

_VERSION = "secret_name, version, value_id, comment, created_by, created_at, disabled_at"


@dataclass(frozen=True)
class SecretVersion:
    secret_name: str
    version: int
    value_id: UUID
    comment: str | None
    created_by: UUID | None
    created_at: datetime
    disabled_at: datetime | None


@dataclass(frozen=True)
class Delivery:
    id: int
    secret_name: str
    version: int
    agent_instance_id: UUID
    channel: str
    assurance: str
    identity_subject: str | None
    ts: datetime


async def next_version(conn: Conn, tenant_id: UUID, name: str) -> int:
    """The next version number, with the name's rows locked against a concurrent writer."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('secret:' || %s::text || '/' || %s, 0))",
        (str(tenant_id), name),
    )
    cur = await conn.execute(
        "SELECT coalesce(max(version), 0) + 1 AS v FROM secret_version "
        "WHERE tenant_id = %s AND secret_name = %s",
        (tenant_id, name),
    )
    return int((await one(cur))["v"])


async def insert_version(
    conn: Conn,
    tenant_id: UUID,
    name: str,
    version: int,
    value_id: UUID,
    comment: str | None,
    created_by: UUID | None,
) -> SecretVersion:
    cur = await conn.execute(
        "INSERT INTO secret_version (tenant_id, secret_name, version, value_id, comment, "
        f"created_by) VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_VERSION}",
        (tenant_id, name, version, value_id, comment, created_by),
    )
    return SecretVersion(**await one(cur))


async def versions(conn: Conn, tenant_id: UUID, name: str) -> list[SecretVersion]:
    """Newest first."""
    cur = await conn.execute(
        f"SELECT {_VERSION} FROM secret_version WHERE tenant_id = %s AND secret_name = %s "
        "ORDER BY version DESC",
        (tenant_id, name),
    )
    return [SecretVersion(**r) for r in await cur.fetchall()]


async def current_versions(
    conn: Conn, tenant_id: UUID, names: Sequence[str] | None = None
) -> dict[str, SecretVersion]:
    """Name -> its current version (the newest not disabled), for ``names`` or every name."""
    cur = await conn.execute(
        f"SELECT DISTINCT ON (secret_name) {_VERSION} FROM secret_version "
        "WHERE tenant_id = %s AND disabled_at IS NULL "
        "AND (%s::text[] IS NULL OR secret_name = ANY(%s)) "
        "ORDER BY secret_name, version DESC",
        (tenant_id, list(names) if names is not None else None, list(names or ())),
    )
    return {r["secret_name"]: SecretVersion(**r) for r in await cur.fetchall()}


async def version_counts(conn: Conn, tenant_id: UUID) -> dict[str, int]:
    cur = await conn.execute(
        "SELECT secret_name, count(*) AS n FROM secret_version WHERE tenant_id = %s "
        "GROUP BY secret_name",
        (tenant_id,),
    )
    return {r["secret_name"]: int(r["n"]) for r in await cur.fetchall()}


async def names_with_versions(conn: Conn, tenant_id: UUID) -> frozenset[str]:
    return frozenset(await version_counts(conn, tenant_id))


async def set_disabled(
    conn: Conn, tenant_id: UUID, name: str, version: int, *, disabled: bool
) -> SecretVersion | None:
    cur = await conn.execute(
        "UPDATE secret_version SET disabled_at = CASE WHEN %s THEN coalesce(disabled_at, now()) "
        "ELSE NULL END WHERE tenant_id = %s AND secret_name = %s AND version = %s "
        f"RETURNING {_VERSION}",
        (disabled, tenant_id, name, version),
    )
    row = await cur.fetchone()
    return SecretVersion(**row) if row is not None else None


async def delete_versions(
    conn: Conn, tenant_id: UUID, name: str, version: int | None
) -> list[UUID]:
    """Delete one version (or all of the name's); their sealed values' ids."""
    cur = await conn.execute(
        "DELETE FROM secret_version WHERE tenant_id = %s AND secret_name = %s "
        "AND (%s::integer IS NULL OR version = %s) RETURNING value_id",
        (tenant_id, name, version, version),
    )
    return [r["value_id"] for r in await cur.fetchall()]


async def delivered_versions(
    conn: Conn, tenant_id: UUID, agent_id: UUID, channel: str, names: Sequence[str]
) -> dict[str, int]:
    """The version of each name last delivered to the agent on ``channel``."""
    cur = await conn.execute(
        "SELECT DISTINCT ON (secret_name) secret_name, version FROM secret_delivery "
        "WHERE tenant_id = %s AND secret_name = ANY(%s) AND agent_instance_id = %s "
        "AND channel = %s ORDER BY secret_name, ts DESC, id DESC",
        (tenant_id, list(names), agent_id, channel),
    )
    return {r["secret_name"]: r["version"] for r in await cur.fetchall()}


async def record_deliveries(
    conn: Conn,
    tenant_id: UUID,
    agent_id: UUID,
    channel: str,
    assurance: str,
    identity_subject: str | None,
    delivered: Sequence[tuple[str, int]],
) -> None:
    if not delivered:
        return
    await conn.execute(
        "INSERT INTO secret_delivery (tenant_id, secret_name, version, agent_instance_id, "
        "channel, assurance, identity_subject) SELECT %s, n, v, %s, %s, %s::assurance, %s "
        "FROM unnest(%s::text[], %s::integer[]) AS d(n, v)",
        (
            tenant_id,
            agent_id,
            channel,
            assurance,
            identity_subject,
            [n for n, _ in delivered],
            [v for _, v in delivered],
        ),
    )


async def deliveries(
    conn: Conn, tenant_id: UUID, name: str, *, before: int | None, limit: int
) -> list[Delivery]:
    """Newest first, keyset on id."""
    cur = await conn.execute(
        "SELECT id, secret_name, version, agent_instance_id, channel, assurance::text AS "
        "assurance, identity_subject, ts FROM secret_delivery WHERE tenant_id = %s "
        "AND secret_name = %s AND (%s::bigint IS NULL OR id < %s) ORDER BY id DESC LIMIT %s",
        (tenant_id, name, before, before, limit),
    )
    return [Delivery(**r) for r in await cur.fetchall()]


async def agents_referencing(conn: Conn, tenant_id: UUID, name: str) -> list[UUID]:
    """Agents whose desired or served artifact refers to the Secret ``name``."""
    cur = await conn.execute(
        "SELECT a.id FROM agent_instance a JOIN artifact r ON r.tenant_id = a.tenant_id "
        "AND (r.hash = a.desired_artifact OR r.hash = a.served_artifact) "
        "WHERE a.tenant_id = %s AND %s = ANY(r.secret_refs) GROUP BY a.id",
        (tenant_id, name),
    )
    return [r["id"] for r in await cur.fetchall()]


async def touch_desired_since(conn: Conn, tenant_id: UUID, agent_ids: Sequence[UUID]) -> None:
    """Move the agents' Last-Modified so their watchers reload (and fetch secrets again)."""
    await conn.execute(
        "UPDATE agent_instance SET desired_since = greatest(now(), desired_since + "
        "interval '1 second') WHERE tenant_id = %s AND id = ANY(%s) "
        "AND desired_since IS NOT NULL",
        (tenant_id, list(agent_ids)),
    )


async def team_id(conn: Conn, tenant_id: UUID, slug: str) -> UUID | None:
    """The id of the team a Secret object names as owner (None: no such team)."""
    cur = await conn.execute(
        "SELECT id FROM team WHERE tenant_id = %s AND slug = %s", (tenant_id, slug)
    )
    row = await cur.fetchone()
    return row["id"] if row is not None else None
