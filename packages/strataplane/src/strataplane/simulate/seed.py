"""Seeding for tests and benchmarks: publish a spec revision as a merge would (without review)
and create many enrolled agents at once. The server's own paths (change sets,
``POST /api/v1/enroll/telegraf``) do the same one at a time, with audit; these write in bulk."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

from platformkit.db.scope import Pool, tenant_transaction
from platformkit.ids import uuid7
from platformkit.tokens import mint_token
from psycopg.types.json import Jsonb

from strataplane.actions.fleet_enrollment import CREDENTIAL_FORMATS
from strataplane.actions.fleet_hooks import move_release
from strataplane.db import SCOPE
from strataplane.domain.fleet_labels import effective_labels
from strataplane.domain.spec.canonical import canonicalize
from strataplane.domain.spec.index import index_columns
from strataplane.domain.tree import tree_hash
from strataplane.store import blobs, counters, objects, revisions


async def publish(
    pool: Pool, tenant_id: UUID, files: Mapping[str, str | bytes], message: str = "seed"
) -> int:
    """A new revision whose tree is exactly ``files``, and the release pointer moved to it."""
    async with tenant_transaction(pool, SCOPE, tenant_id) as conn:
        columns, hashes = [], {}
        for path, data in files.items():
            canonical = canonicalize(data.encode() if isinstance(data, str) else data, path)
            hashes[path] = await blobs.put_blob(conn, tenant_id, canonical.content)
            columns.append(index_columns(path, canonical.value))
        number = await counters.take(conn, tenant_id, "revision")
        await revisions.insert_revision(
            conn,
            tenant_id,
            number,
            tree_hash=tree_hash(hashes),
            message=message,
            created_by=None,
        )
        current = [e.path for e in await objects.tree_at(conn, tenant_id, number - 1)]
        await objects.close_paths(conn, tenant_id, number, current)
        await objects.open_objects(conn, tenant_id, number, columns)
        await move_release(conn, tenant_id, number, None)
    return number


async def seed_fleet(
    pool: Pool,
    tenant_id: UUID,
    count: int,
    label_sets: Sequence[Mapping[str, str]],
    *,
    version: str = "1.39.1",
    prefix: str = "sim",
    kind: str = "telegraf",
) -> list[tuple[UUID, str, str]]:
    """``count`` approved agents of ``kind`` (Telegraf or Vector) on their own hosts, labels
    round-robin from ``label_sets`` (source enrollment); returns (agent id, instance id,
    credential)."""
    out: list[tuple[UUID, str, str]] = []
    async with tenant_transaction(pool, SCOPE, tenant_id) as conn, conn.cursor() as cur:
        hosts, labels, agents, creds = [], [], [], []
        for i in range(count):
            host_id, agent_id, name = uuid7(), uuid7(), f"{prefix}-{i:06d}"
            own = label_sets[i % len(label_sets)] if label_sets else {}
            rows = [("enrollment", k, v) for k, v in own.items()]
            eff = effective_labels(rows, name=name, kind="server", owner=None)
            hosts.append((host_id, tenant_id, name, Jsonb(eff)))
            labels += [(tenant_id, host_id, "enrollment", k, v) for k, v in own.items()]
            agents.append((agent_id, tenant_id, host_id, kind, name, version, version))
            minted = mint_token(CREDENTIAL_FORMATS[kind])
            creds.append(
                (uuid7(), tenant_id, agent_id, minted.display_prefix, bytes.fromhex(minted.hash))
            )
            out.append((agent_id, name, minted.plaintext))
        # COPY is refused under row-level security: INSERTs over arrays instead
        for table, cols, casts, rows_ in (
            ("host", "id, tenant_id, name, labels", "uuid uuid text jsonb", hosts),
            (
                "host_label",
                "tenant_id, host_id, source, key, value",
                "uuid uuid label_source text text",
                labels,
            ),
            (
                "agent_instance",
                "id, tenant_id, host_id, kind, external_id, version, version_raw",
                "uuid uuid uuid agent_kind text text text",
                agents,
            ),
            (
                "agent_credential",
                "id, tenant_id, agent_instance_id, token_prefix, token_hash",
                "uuid uuid uuid text bytea",
                creds,
            ),
        ):
            arrays = ", ".join(f"%b::{c}[]" for c in casts.split())
            for start in range(0, len(rows_), 5000):
                columns = [list(c) for c in zip(*rows_[start : start + 5000], strict=True)]
                if columns:
                    await cur.execute(
                        f"INSERT INTO {table} ({cols}) SELECT * FROM unnest({arrays})", columns
                    )
        await cur.execute(
            "UPDATE agent_instance SET approved_at = now() WHERE tenant_id = %s "
            "AND approved_at IS NULL AND external_id LIKE %s",
            (tenant_id, f"{prefix}-%"),
        )
    return out
