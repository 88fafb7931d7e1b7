"""Row-level security as the application role, over every table with a tenant_id: with no
tenant nothing is visible, tenant A neither sees nor writes tenant B's rows, platform scope
sees both. The loop reads the tables from the catalog, so a new tenant table is covered (and
must get a seed row here)."""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from platformkit.db.pool import open_pool
from platformkit.db.scope import Pool, platform_transaction, tenant_transaction, transaction
from psycopg import sql
from strataplane import db
from strataplane.actions import service_accounts, teams, tokens
from strataplane.testing import Seed

EXEMPT = {"platform_audit_event"}  # platform chain: no RLS, tenant_id kept after deletion


def tenant_tables(admin_url: str) -> list[str]:
    with psycopg.connect(admin_url) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' "
            "WHERE n.nspname = 'strataplane' AND c.relkind = 'r' ORDER BY 1"
        ).fetchall()
    return [r[0] for r in rows if r[0] not in EXEMPT]


def _raw_rows(admin_url: str, tenant_id: uuid.UUID, admin_id: uuid.UUID) -> None:
    """Spec store, operation and idempotency rows, written as the administrator."""
    digest = hashlib.sha256(tenant_id.bytes).digest()
    cs, blob = uuid.uuid4(), hashlib.sha256(b"x").digest()
    with psycopg.connect(admin_url, options="-c search_path=strataplane") as conn:
        conn.execute(
            "INSERT INTO spec_blob (tenant_id, hash, content) VALUES (%s, %s, 'x')",
            (tenant_id, blob),
        )
        conn.execute(
            "INSERT INTO spec_object (tenant_id, kind, name, path, blob_hash, owner_team, "
            "valid_from) VALUES (%s, 'Settings', 'settings', 'settings.toml', %s, 'p', 1)",
            (tenant_id, blob),
        )
        conn.execute(
            "INSERT INTO change_set (id, tenant_id, number, title, author_id, base_revision_id, "
            "digest) VALUES (%s, %s, 1, 'x', %s, 1, %s)",
            (cs, tenant_id, admin_id, digest),
        )
        conn.execute(
            "INSERT INTO change_set_file (tenant_id, change_set_id, path, blob_hash) "
            "VALUES (%s, %s, 'settings.toml', %s)",
            (tenant_id, cs, blob),
        )
        conn.execute(
            "INSERT INTO change_set_review (id, tenant_id, change_set_id, reviewer_id, decision, "
            "digest) VALUES (%s, %s, %s, %s, 'comment', %s)",
            (uuid.uuid4(), tenant_id, cs, admin_id, digest),
        )
        conn.execute(
            "INSERT INTO operation (id, tenant_id, kind, object_id, created_by) "
            "VALUES (%s, %s, 'change_set.validate', %s, %s)",
            (uuid.uuid4(), tenant_id, str(cs), admin_id),
        )
        conn.execute(
            "INSERT INTO idempotency_key (principal_id, key, tenant_id, request_hash, "
            "response_status, response_body) VALUES (%s, 'k', %s, %s, 201, '')",
            (admin_id, tenant_id, digest),
        )
        conn.execute(
            "INSERT INTO tenant_invitation (id, tenant_id, user_id, expires_at) "
            "VALUES (%s, %s, %s, now() + interval '1 day')",
            (uuid.uuid4(), tenant_id, admin_id),
        )
        _fleet_rows(conn, tenant_id, cs, digest)


def _fleet_rows(conn: psycopg.Connection[Any], t: uuid.UUID, cs: uuid.UUID, digest: bytes) -> None:
    """One row of each fleet table (migrations 0010-0012, 0030, 0050)."""
    host, agent, token, rollout = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    value = uuid.uuid4()
    statements = [
        (
            "INSERT INTO fleet_render_url (tenant_id, agent_url) VALUES (%s, 'http://a:1')",
            (t,),
        ),
        ("INSERT INTO host (id, tenant_id, name) VALUES (%s, %s, 'h')", (host, t)),
        (
            "INSERT INTO host_label (tenant_id, host_id, source, key, value) "
            "VALUES (%s, %s, 'manual', 'env', 'prod')",
            (t, host),
        ),
        (
            "INSERT INTO network_zone (id, tenant_id, cidr, labels) VALUES (%s, %s, '10.0.0.0/8', "
            "'{}')",
            (uuid.uuid4(), t),
        ),
        (
            "INSERT INTO enrollment_token (id, tenant_id, name, agent_kind, token_prefix, "
            "token_hash) VALUES (%s, %s, 'e', 'telegraf', 'spn_', %s)",
            (token, t, digest),
        ),
        (
            "INSERT INTO trust_anchor (id, tenant_id, name, ca_pem) VALUES (%s, %s, 'ca', 'pem')",
            (uuid.uuid4(), t),
        ),
        (
            "INSERT INTO artifact (tenant_id, hash, agent_kind, content, size) "
            "VALUES (%s, %s, 'telegraf', 'x', 1)",
            (t, digest),
        ),
        (
            "INSERT INTO agent_instance (id, tenant_id, host_id, kind, external_id, "
            "desired_artifact) VALUES (%s, %s, %s, 'telegraf', 'a', %s)",
            (agent, t, host, digest),
        ),
        (
            "INSERT INTO class_default (tenant_id, enrollment_token_id, agent_version) "
            "VALUES (%s, %s, '1.39.1')",
            (t, token),
        ),
        (
            "INSERT INTO class_served (tenant_id, enrollment_token_id, address, artifact) "
            "VALUES (%s, %s, '10.0.0.1', %s)",
            (t, token, digest),
        ),
        (
            "INSERT INTO agent_credential (id, tenant_id, agent_instance_id, token_prefix, "
            "token_hash) VALUES (%s, %s, %s, 'spt_', %s)",
            (uuid.uuid4(), t, agent, digest),
        ),
        (
            "INSERT INTO agent_status_event (tenant_id, agent_instance_id, field, to_value) "
            "VALUES (%s, %s, 'health', 'healthy')",
            (t, agent),
        ),
        (
            "INSERT INTO agent_log_entry (tenant_id, agent_instance_id, ts, level, source, "
            "message) "
            "VALUES (%s, %s, now(), 'WARN', 'inputs.cpu', 'm')",
            (t, agent),
        ),
        (
            "INSERT INTO rollout (id, tenant_id, number, agent_kind, from_revision_id, "
            "to_revision_id) VALUES (%s, %s, 1, 'telegraf', 1, 1)",
            (rollout, t),
        ),
        (
            "INSERT INTO release (tenant_id, agent_kind, revision_id, rollout_id) "
            "VALUES (%s, 'telegraf', 1, %s)",
            (t, rollout),
        ),
        (
            "INSERT INTO change_set_impact (tenant_id, change_set_id, agent_instance_id, "
            "after_artifact) VALUES (%s, %s, %s, %s)",
            (t, cs, agent, digest),
        ),
        # safe delivery (migration 0030)
        (
            "INSERT INTO artifact_validation (tenant_id, artifact_hash, agent_version, level, ok, "
            "validator) VALUES (%s, %s, '1.39.1', 'schema', true, 'v')",
            (t, digest),
        ),
        (
            "INSERT INTO rollout_stage (tenant_id, rollout_id, idx, name, selector) "
            "VALUES (%s, %s, 0, 'all', '{}')",
            (t, rollout),
        ),
        (
            "INSERT INTO rollout_assignment (tenant_id, rollout_id, agent_instance_id, stage_idx) "
            "VALUES (%s, %s, %s, 0)",
            (t, rollout, agent),
        ),
        (
            "INSERT INTO pin (id, tenant_id, agent_instance_id, revision_id, reason) "
            "VALUES (%s, %s, %s, 1, 'r')",
            (uuid.uuid4(), t, agent),
        ),
        # secrets and audit sinks (migrations 0060, 0061)
        (
            "INSERT INTO secret_key (id, fingerprint) VALUES (1, %s) ON CONFLICT (id) DO NOTHING",
            (digest,),
        ),
        (
            "INSERT INTO tenant_key (tenant_id, id, kek_id, nonce, wrapped_key) "
            "VALUES (%s, 1, 1, 'n', 'w')",
            (t,),
        ),
        (
            "INSERT INTO sealed_value (id, tenant_id, owner, key_id, nonce, ciphertext) "
            "VALUES (%s, %s, 'secret/X/1', 1, 'n', 'c')",
            (value, t),
        ),
        (
            "INSERT INTO secret_version (tenant_id, secret_name, version, value_id) "
            "VALUES (%s, 'X', 1, %s)",
            (t, value),
        ),
        (
            "INSERT INTO secret_delivery (tenant_id, secret_name, version, agent_instance_id, "
            "channel, assurance) VALUES (%s, 'X', 1, %s, 'telegraf-secretstore', 'low')",
            (t, agent),
        ),
        (
            "INSERT INTO audit_sink (id, tenant_id, kind, config, cursor_seq) "
            "VALUES (%s, %s, 'syslog', '{}', 0)",
            (uuid.uuid4(), t),
        ),
        # Elastic Agent (migration 0070)
        (
            "INSERT INTO agent_component (tenant_id, agent_instance_id, component_id, state) "
            "VALUES (%s, %s, 'system/metrics-default', 'HEALTHY')",
            (t, agent),
        ),
        (
            "INSERT INTO agent_action (id, tenant_id, agent_instance_id, type, artifact, "
            "policy_seq) VALUES (%s, %s, %s, 'POLICY_CHANGE', %s, 1)",
            (uuid.uuid4(), t, agent, digest),
        ),
    ]
    for statement, args in statements:
        conn.execute(statement, args)


@pytest.fixture
async def two_tenants(sp_seed: Seed, strataplane_database: str) -> list[uuid.UUID]:
    ids = []
    for slug in ("alpha", "beta"):
        tenant, admin = await sp_seed.tenant(slug)
        ctx = sp_seed.ctx(admin, tenant.id)
        team = await teams.create_team(ctx, "sre", "SRE")
        await teams.add_team_member(ctx, team.id, admin.id)
        await service_accounts.create_service_account(ctx, "ci", owner_team_id=team.id)
        await tokens.create_token(ctx, "laptop")
        _raw_rows(strataplane_database, tenant.id, admin.id)
        ids.append(tenant.id)
    return ids


@pytest.fixture
async def app_pool(strataplane_database: str) -> AsyncIterator[Pool]:
    pool = await open_pool(db.app_url(strataplane_database), min_size=1, max_size=1)
    yield pool
    await pool.close()


async def _count(conn: Any, table: str, where: str = "true", *args: Any) -> int:
    query = sql.SQL("SELECT count(*) AS n FROM {} WHERE " + where).format(sql.Identifier(table))
    row = await (await conn.execute(query, args)).fetchone()
    return int(row["n"])


def test_every_tenant_table_forces_its_policy(strataplane_database: str) -> None:
    with psycopg.connect(strataplane_database) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, "
            "array(SELECT polname FROM pg_policy p WHERE p.polrelid = c.oid) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'strataplane' AND c.relkind = 'r'"
        ).fetchall()
    tenant = set(tenant_tables(strataplane_database))
    for name, enabled, forced, policies in rows:
        expected = name in tenant
        assert (enabled, forced) == (expected, expected), name
        assert policies == (["tenant_isolation"] if expected else []), name


def test_application_role_cannot_bypass(strataplane_database: str) -> None:
    with psycopg.connect(strataplane_database) as conn:
        row = conn.execute(
            "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s", (db.APP_ROLE,)
        ).fetchone()
        owners = conn.execute(
            "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'strataplane'"
        ).fetchall()
    assert row == (False, False)
    assert owners == [(db.OWNER_ROLE,)]


async def test_isolation_in_every_tenant_table(
    two_tenants: list[uuid.UUID], app_pool: Pool, strataplane_database: str
) -> None:
    a, b = two_tenants
    tables = tenant_tables(strataplane_database)
    assert len(tables) >= 16
    for table in tables:
        async with platform_transaction(app_pool, db.SCOPE) as conn:
            per_tenant = [await _count(conn, table, "tenant_id = %s", t) for t in (a, b)]
        assert min(per_tenant) >= 1, f"seed a row of {table} for both tenants in this test"
        async with transaction(app_pool) as conn:
            assert await _count(conn, table) == 0, f"{table} visible without a tenant"
        async with tenant_transaction(app_pool, db.SCOPE, a) as conn:
            assert await _count(conn, table) == per_tenant[0], table
            assert await _count(conn, table, "tenant_id = %s", b) == 0, table
            for verb in ("UPDATE {} SET tenant_id = tenant_id", "DELETE FROM {}"):
                query = sql.SQL(verb + " WHERE tenant_id = %s").format(sql.Identifier(table))
                # audit_event: the application may not update it at all
                with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
                    async with conn.transaction():
                        assert (await conn.execute(query, (b,))).rowcount == 0, table
        with psycopg.connect(strataplane_database) as admin:
            copy = admin.execute(
                sql.SQL(
                    "SELECT row_to_json(t)::text FROM strataplane.{} t WHERE tenant_id = %s LIMIT 1"
                ).format(sql.Identifier(table)),
                (b,),
            ).fetchone()
            writable = [  # generated columns (agent_instance.assurance) take no value
                sql.Identifier(r[0])
                for r in admin.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass "
                    "AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
                    (f"strataplane.{table}",),
                )
            ]
        assert copy is not None
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            async with tenant_transaction(app_pool, db.SCOPE, a) as conn:
                await conn.execute(
                    sql.SQL(
                        "INSERT INTO {t} ({c}) SELECT {c} FROM json_populate_record(NULL::{t}, %s)"
                    ).format(t=sql.Identifier(table), c=sql.SQL(", ").join(writable)),
                    (copy[0],),
                )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            async with tenant_transaction(app_pool, db.SCOPE, a) as conn:
                await conn.execute(
                    sql.SQL("UPDATE {} SET tenant_id = %s WHERE tenant_id = %s").format(
                        sql.Identifier(table)
                    ),
                    (b, a),
                )


async def test_owner_role_is_bound_by_the_policy_too(
    two_tenants: list[uuid.UUID], strataplane_database: str
) -> None:
    with psycopg.connect(strataplane_database) as conn:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(db.OWNER_ROLE)))
        assert conn.execute("SELECT count(*) FROM strataplane.team").fetchone() == (0,)
