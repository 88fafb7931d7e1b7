"""class_default and class_served: Telegraf class mode (docs/strataplane/agents/telegraf.md §7).

A class is an enrollment token of mode ``class``; its members are the ``agent_instance`` rows
enrolled with it (``external_id`` = host name), told apart on the config path only by their
source address (index ``agent_instance_class``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.store.rows import maybe, one


@dataclass(frozen=True)
class ClassDefault:
    desired_revision_id: int | None
    desired_artifact: bytes | None
    desired_since: datetime | None


@dataclass(frozen=True)
class Member:
    id: UUID
    desired_artifact: bytes | None
    desired_since: datetime | None


def _bytes(value: object) -> bytes | None:
    return bytes(value) if isinstance(value, (bytes, memoryview)) else None


def _default(row: dict[str, object]) -> ClassDefault:
    revision, since = row["desired_revision_id"], row["desired_since"]
    assert revision is None or isinstance(revision, int)
    assert since is None or isinstance(since, datetime)
    return ClassDefault(revision, _bytes(row["desired_artifact"]), since)


async def get_default(
    conn: Conn, tenant_id: UUID, token_id: UUID, version: str
) -> ClassDefault | None:
    cur = await conn.execute(
        "SELECT desired_revision_id, desired_artifact, desired_since FROM class_default "
        "WHERE tenant_id = %s AND enrollment_token_id = %s AND agent_version = %s",
        (tenant_id, token_id, version),
    )
    row = await maybe(cur)
    return _default(row) if row is not None else None


async def write_default(
    conn: Conn, tenant_id: UUID, token_id: UUID, version: str, revision_id: int, artifact: bytes
) -> ClassDefault:
    """Record a successful class render; ``desired_since`` moves only when the bytes change."""
    cur = await conn.execute(
        "INSERT INTO class_default (tenant_id, enrollment_token_id, agent_version, "
        "desired_revision_id, desired_artifact, desired_since) "
        "VALUES (%(t)s, %(token)s, %(v)s, %(rev)s, %(art)s, date_trunc('second', now())) "
        "ON CONFLICT (enrollment_token_id, agent_version) DO UPDATE SET "
        "desired_revision_id = EXCLUDED.desired_revision_id, "
        "desired_artifact = EXCLUDED.desired_artifact, "
        "desired_since = CASE WHEN class_default.desired_artifact = EXCLUDED.desired_artifact "
        "THEN class_default.desired_since ELSE EXCLUDED.desired_since END "
        "RETURNING desired_revision_id, desired_artifact, desired_since",
        {"t": tenant_id, "token": token_id, "v": version, "rev": revision_id, "art": artifact},
    )
    return _default(await one(cur))


async def members_at(
    conn: Conn, tenant_id: UUID, token_id: UUID, address: str, version: str
) -> list[Member]:
    """The approved, unquarantined members of the class at ``version`` whose last request came
    from ``address``."""
    cur = await conn.execute(
        "SELECT id, desired_artifact, desired_since FROM agent_instance "
        "WHERE tenant_id = %s AND enrollment_token_id = %s AND last_source_ip = %s "
        "AND version = %s AND approved_at IS NOT NULL AND quarantined_at IS NULL ORDER BY id",
        (tenant_id, token_id, address, version),
    )
    rows = await cur.fetchall()
    return [Member(r["id"], _bytes(r["desired_artifact"]), r["desired_since"]) for r in rows]


async def served_to(conn: Conn, tenant_id: UUID, token_id: UUID, address: str) -> bytes | None:
    cur = await conn.execute(
        "SELECT artifact FROM class_served "
        "WHERE tenant_id = %s AND enrollment_token_id = %s AND address = %s",
        (tenant_id, token_id, address),
    )
    row = await maybe(cur)
    return _bytes(row["artifact"]) if row is not None else None


async def record_served(
    conn: Conn, tenant_id: UUID, token_id: UUID, address: str, artifact: bytes
) -> None:
    """A GET from ``address`` delivered ``artifact``: the address's row, written when it
    changes (and at most once a day otherwise, so that ``served_at`` tells an address that
    still polls from one gone, for ``prune_served``), and the members there that desire it,
    as served."""
    await conn.execute(
        "INSERT INTO class_served (tenant_id, enrollment_token_id, address, artifact) "
        "VALUES (%s, %s, %s, %s) ON CONFLICT (enrollment_token_id, address) DO UPDATE "
        "SET artifact = EXCLUDED.artifact, served_at = now() "
        "WHERE class_served.artifact <> EXCLUDED.artifact "
        "OR class_served.served_at < now() - interval '1 day'",
        (tenant_id, token_id, address, artifact),
    )
    # rows in id order, skipping those a batch of reports holds, as every bulk writer of
    # agent_instance does (fleet-internals.md §5): the next GET marks a skipped one
    await conn.execute(
        "UPDATE agent_instance SET served_artifact = desired_artifact, served_at = now() "
        "WHERE id IN (SELECT id FROM agent_instance WHERE tenant_id = %s "
        "AND enrollment_token_id = %s AND last_source_ip = %s AND desired_artifact = %s "
        "AND served_artifact IS DISTINCT FROM desired_artifact "
        "ORDER BY id FOR UPDATE SKIP LOCKED)",
        (tenant_id, token_id, address, artifact),
    )


async def prune_served(conn: Conn, tenant_id: UUID, days: int = 30) -> int:
    """Forget the addresses without a GET for ``days``; a missing row costs one reload."""
    cur = await conn.execute(
        "DELETE FROM class_served WHERE tenant_id = %s "
        "AND served_at < now() - make_interval(days => %s)",
        (tenant_id, days),
    )
    return cur.rowcount


async def mark_ambiguous(conn: Conn, tenant_id: UUID, agents: list[UUID]) -> None:
    """Members at one address desire different artifacts: the address cannot tell them apart.
    Each change of sync is a transition (``agent_status_event``), as a heartbeat's is."""
    await conn.execute(
        "WITH old AS (SELECT id, sync::text AS sync FROM agent_instance WHERE tenant_id = "
        "%(t)s AND id = ANY(%(a)s) AND sync_reason IS DISTINCT FROM 'ambiguous_address' "
        "ORDER BY id FOR UPDATE SKIP LOCKED), "
        "upd AS (UPDATE agent_instance i SET sync = 'out_of_sync', "
        "sync_reason = 'ambiguous_address' FROM old WHERE i.tenant_id = %(t)s AND i.id = old.id "
        "RETURNING i.id) "
        "INSERT INTO agent_status_event (tenant_id, agent_instance_id, field, from_value, "
        "to_value) SELECT %(t)s, old.id, 'sync', old.sync, 'out_of_sync' FROM old "
        "JOIN upd ON upd.id = old.id WHERE old.sync <> 'out_of_sync'",
        {"t": tenant_id, "a": agents},
    )
