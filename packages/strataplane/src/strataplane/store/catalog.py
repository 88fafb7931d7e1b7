"""catalog_bundle and plugin_schema (installation-wide, platform scope to write, every scope to
read) and artifact_validation (per tenant)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from platformkit.db.scope import Conn
from psycopg.types.json import Jsonb


@dataclass(frozen=True)
class BundleRow:
    id: UUID
    agent_kind: str
    version: str
    bundle_hash: bytes
    contents: dict[str, Any]
    imported_at: Any


async def insert_bundle(
    conn: Conn,
    bundle_id: UUID,
    *,
    agent_kind: str,
    version: str,
    bundle_hash: bytes,
    contents: Mapping[str, Any],
    plugins: Mapping[str, Mapping[str, Mapping[str, Any]]],
    imported_by: UUID | None,
) -> bool:
    """Insert the bundle and its plugin schemas; False when that version or hash is there."""
    cur = await conn.execute(
        "INSERT INTO catalog_bundle (id, agent_kind, version, bundle_hash, contents, imported_by) "
        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
        (bundle_id, agent_kind, version, bundle_hash, Jsonb(dict(contents)), imported_by),
    )
    if await cur.fetchone() is None:
        return False
    rows = [
        (bundle_id, section, plugin, Jsonb(dict(schema)))
        for section, named in plugins.items()
        for plugin, schema in named.items()
    ]
    async with conn.cursor() as c:
        await c.executemany(
            "INSERT INTO plugin_schema (bundle_id, section, plugin, schema) "
            "VALUES (%s, %s, %s, %s)",
            rows,
        )
    return True


async def list_bundles(conn: Conn, agent_kind: str | None = None) -> list[BundleRow]:
    cur = await conn.execute(
        "SELECT id, agent_kind::text, version, bundle_hash, contents, imported_at "
        "FROM catalog_bundle WHERE %(kind)s::text IS NULL OR agent_kind::text = %(kind)s "
        "ORDER BY agent_kind, string_to_array(version, '.')::int[]",
        {"kind": agent_kind},
    )
    return [
        BundleRow(
            r["id"],
            r["agent_kind"],
            r["version"],
            bytes(r["bundle_hash"]),
            r["contents"],
            r["imported_at"],
        )
        for r in await cur.fetchall()
    ]


async def plugin_schemas(conn: Conn, bundle_id: UUID) -> dict[str, dict[str, Any]]:
    cur = await conn.execute(
        "SELECT section, plugin, schema FROM plugin_schema WHERE bundle_id = %s", (bundle_id,)
    )
    out: dict[str, dict[str, Any]] = {}
    for r in await cur.fetchall():
        out.setdefault(r["section"], {})[r["plugin"]] = r["schema"]
    return out


async def get_plugin_schema(
    conn: Conn, agent_kind: str, version: str, section: str, plugin: str
) -> dict[str, Any] | None:
    cur = await conn.execute(
        "SELECT s.schema FROM plugin_schema s JOIN catalog_bundle b ON b.id = s.bundle_id "
        "WHERE b.agent_kind::text = %s AND b.version = %s AND s.section = %s AND s.plugin = %s",
        (agent_kind, version, section, plugin),
    )
    row = await cur.fetchone()
    return None if row is None else dict(row["schema"])


@dataclass(frozen=True)
class Validation:
    artifact_hash: bytes
    agent_version: str
    level: str
    ok: bool
    diagnostics: list[dict[str, Any]]
    validator: str


async def get_validations(
    conn: Conn, tenant_id: UUID, pairs: Sequence[tuple[bytes, str]], level: str = "schema"
) -> dict[tuple[bytes, str], Validation]:
    if not pairs:
        return {}
    cur = await conn.execute(
        "SELECT v.artifact_hash, v.agent_version, v.level, v.ok, v.diagnostics, v.validator "
        "FROM artifact_validation v JOIN unnest(%b::bytea[], %b::text[]) AS p(h, ver) "
        "ON v.artifact_hash = p.h AND v.agent_version = p.ver "
        "WHERE v.tenant_id = %s AND v.level = %s",
        ([p[0] for p in pairs], [p[1] for p in pairs], tenant_id, level),
    )
    found = {}
    for r in await cur.fetchall():
        v = Validation(
            bytes(r["artifact_hash"]),
            r["agent_version"],
            r["level"],
            r["ok"],
            r["diagnostics"],
            r["validator"],
        )
        found[(v.artifact_hash, v.agent_version)] = v
    return found


async def put_validations(conn: Conn, tenant_id: UUID, rows: Sequence[Validation]) -> None:
    if not rows:
        return
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO artifact_validation (tenant_id, artifact_hash, agent_version, level, ok, "
            "diagnostics, validator) VALUES (%s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (tenant_id, artifact_hash, agent_version, level) DO NOTHING",
            [
                (
                    tenant_id,
                    v.artifact_hash,
                    v.agent_version,
                    v.level,
                    v.ok,
                    Jsonb(v.diagnostics),
                    v.validator,
                )
                for v in rows
            ],
        )
