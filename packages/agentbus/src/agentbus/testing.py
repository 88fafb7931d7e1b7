"""Test helpers: a migrated agentbus database per test, pools per role, and a seed of one row in
every tenant table.

Use them from a test module with ``pytest_plugins = ["agentbus.testing"]``.
The template is migrated once per session; each test gets a fresh clone. ``seed_tenant`` writes
through an administrative connection (RLS does not apply to it) and returns the statements it
ran, so a test can replay them under another tenant's scope.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from platformkit.crypto import Keyring
from platformkit.db.pool import open_pool
from platformkit.db.scope import Pool
from platformkit.ids import uuid7
from platformkit.testing.databases import DatabaseFactory
from psycopg import AsyncConnection

from agentbus import db
from agentbus.actions.context import Actor, Ctx

Statement = tuple[str, str, dict[str, Any]]


async def agentbus_template(database_factory: DatabaseFactory) -> str:
    async def migrate(url: str) -> object:
        return await db.migrator().migrate(url)

    return await database_factory.template("agentbus", migrate)


@pytest.fixture
async def agentbus_db(database_factory: DatabaseFactory) -> AsyncIterator[str]:
    """Administrative URL of a freshly migrated agentbus database."""
    url = database_factory.create(await agentbus_template(database_factory), stem="agentbus")
    yield url
    database_factory.drop(url)


@pytest.fixture(scope="session")
async def agentbus_shared_db(database_factory: DatabaseFactory) -> AsyncIterator[str]:
    """One migrated database for the whole session, for tests that only read the schema."""
    url = database_factory.create(await agentbus_template(database_factory), stem="agentbus_ro")
    yield url
    database_factory.drop(url)


@pytest.fixture
async def agentbus_app_pool(agentbus_db: str) -> AsyncIterator[Pool]:
    """Logged in as agentbus_app: row-level security applies."""
    pool = await db.open_app_pool(agentbus_db, max_size=2)
    yield pool
    await pool.close()


@pytest.fixture
async def agentbus_support_pool(agentbus_db: str) -> AsyncIterator[Pool]:
    pool = await open_pool(db.support_url(agentbus_db), min_size=1, max_size=1)
    yield pool
    await pool.close()


@pytest.fixture
def agentbus_keyring() -> Keyring:
    return Keyring.in_memory()


@pytest.fixture
def agentbus_operator(agentbus_app_pool: Pool, agentbus_keyring: Keyring) -> Ctx:
    """The platform operator, acting through the app role with an in-memory keyring."""
    return Ctx(agentbus_app_pool, Actor.operator("cli:test"), keyring=agentbus_keyring)


def seed_statements(tenant_id: uuid.UUID, slug: str) -> list[Statement]:
    """One row in each tenant table, foreign keys consistent, for ``tenant_id``. Its support
    consent window is closed, so seeding alone never opens support access."""
    names = "ws usr inv tok agt key cnv msg tsk trn rcp pol grt blb aud csn sub usg lnk ses".split()  # noqa: SIM905 - one line reads better than 20 quoted words
    now = datetime.now(UTC)
    p: dict[str, Any] = {k: uuid7() for k in names} | {
        "t": tenant_id,
        "slug": slug,
        "now": now,
        "later": now + timedelta(days=30),
        "h": hashlib.sha256(uuid7().bytes).digest(),
        "addr": f"agent://{slug}/main/worker",
        "tp": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    }
    # (table, columns, values): every tenant table, in foreign-key order.
    rows = [
        ("tenants", "id, slug, display_name, nats_stream, kek_ref",
         "%(t)s, %(slug)s, 'T', 'T_x', 'kms://platform/test'"),
        ("workspaces", "id, tenant_id, slug, display_name", "%(ws)s, %(t)s, 'main', 'Main'"),
        ("users", "id, tenant_id, idp, idp_subject, email",
         "%(usr)s, %(t)s, 'oidc:test', %(slug)s, %(slug)s || '@example.test'"),
        ("tenant_memberships", "tenant_id, user_id, role", "%(t)s, %(usr)s, 'owner'"),
        ("workspace_memberships", "tenant_id, workspace_id, user_id, role",
         "%(t)s, %(ws)s, %(usr)s, 'admin'"),
        ("invitations", "id, tenant_id, email, token_hash, invited_by, expires_at",
         "%(inv)s, %(t)s, 'new@example.test', %(h)s, %(usr)s, %(later)s"),
        ("integration_tokens", "id, tenant_id, owner_user_id, name, env, token_hash, prefix, last4",
         "%(tok)s, %(t)s, %(usr)s, 'seed', 'test', %(h)s, 'ab_test_abcdef', 'wxyz'"),
        ("agents", "id, tenant_id, workspace_id, owner_user_id, name, address, nats_consumer,"
         " inbox_subject", "%(agt)s, %(t)s, %(ws)s, %(usr)s, 'worker', %(addr)s, 'agt_x', 'inbox'"),
        ("agent_keys", "id, tenant_id, agent_id, public_key, fingerprint, spiffe_id, expires_at",
         "%(key)s, %(t)s, %(agt)s, %(h)s, 'fp', 'spiffe://x', %(later)s"),
        ("conversations", "id, tenant_id, workspace_id, started_by",
         "%(cnv)s, %(t)s, %(ws)s, %(agt)s"),
        ("messages", "id, tenant_id, workspace_id, conversation_id, type, schema_url,"
         " from_agent_id, to_agent_id, to_address, traceparent, sig, signing_key_id, payload_ref,"
         " payload_bytes, payload_sha256, dek_version",
         "%(msg)s, %(t)s, %(ws)s, %(cnv)s, 'agentbus.message.v1', 'https://x', %(agt)s, %(agt)s,"
         " %(addr)s, %(tp)s, %(h)s, %(key)s, 'payloads/x.bin', 2, %(h)s, 1"),
        ("tasks", "id, tenant_id, workspace_id, conversation_id, request_msg_id,"
         " requester_agent_id, recipient_agent_id, idempotency_key, capability",
         "%(tsk)s, %(t)s, %(ws)s, %(cnv)s, %(msg)s, %(agt)s, %(agt)s, 'k1', 'code.review'"),
        ("task_transitions", "id, tenant_id, task_id, to_state",
         "%(trn)s, %(t)s, %(tsk)s, 'submitted'"),
        ("delivery_state", "tenant_id, msg_id, agent_id", "%(t)s, %(msg)s, %(agt)s"),
        ("receipts", "id, tenant_id, msg_id, issued_to_token, signature",
         "%(rcp)s, %(t)s, %(msg)s, %(tok)s, %(h)s"),
        ("policies", "id, tenant_id, name, cedar, created_by",
         "%(pol)s, %(t)s, 'default', 'permit(principal, action, resource);', %(usr)s"),
        ("grants", "id, tenant_id, publisher_agent_id, consumer_tenant_id, capabilities, approval",
         "%(grt)s, %(t)s, %(agt)s, %(t)s, '{code.review}', 'auto'"),
        ("blobs", "id, tenant_id, uploaded_by, s3_key, content_type, size_bytes, sha256,"
         " dek_version, expires_at", "%(blb)s, %(t)s, %(agt)s, 'k', 'text/plain', 1, %(h)s, 1,"
         " %(later)s"),
        ("audit_actions", "id, tenant_id, actor_type, actor_id, action",
         "%(aud)s, %(t)s, 'system', 'seed', 'seed.create'"),
        ("support_consents", "id, tenant_id, granted_by, scope, starts_at, ends_at",
         "%(csn)s, %(t)s, %(usr)s, '{}', %(now)s - interval '2 days', %(now)s - interval '1 day'"),
        ("subscriptions", "id, tenant_id, plan", "%(sub)s, %(t)s, 'starter'"),
        ("tenant_keys", "tenant_id, version, dek_wrapped, kek_ref, kek_provider",
         "%(t)s, 1, %(h)s, 'kms://platform/test', 'platform'"),
        ("a2a_bridges", "tenant_id, workspace_id, agent_id, key_id, private_key_enc",
         "%(t)s, %(ws)s, %(agt)s, %(key)s, %(h)s"),
        ("audit_chain", "tenant_id, seq, at, event_id, event_kind, actor, summary, prev_hash,"
         " row_hash", "%(t)s, 1, %(now)s, %(aud)s, 'audit_action', 'system:seed', 'seed.create',"
         " decode(repeat('00', 32), 'hex'), decode(repeat('11', 32), 'hex')"),
        ("audit_heads", "tenant_id, seq, row_hash",
         "%(t)s, 1, decode(repeat('11', 32), 'hex')"),
        ("usage", "usage_id, recorded_at, tenant_id, workspace_id, agent_id, task_id, harness,"
         " provider, model, cost_usd, cost_source, reported_by, confidence",
         "%(usg)s, %(now)s, %(t)s, %(ws)s, %(agt)s, %(tsk)s, 'claude', 'anthropic',"
         " 'claude-sonnet-4-5', 0.01, 'computed', 'harness', 'exact'"),
        ("console_sign_in_links", "id, tenant_id, user_id, token_hash, expires_at",
         "%(lnk)s, %(t)s, %(usr)s, %(h)s, %(later)s"),
        ("console_sessions", "id, tenant_id, user_id, secret_hash, expires_at",
         "%(ses)s, %(t)s, %(usr)s, %(h)s, %(later)s"),
        ("analytics_outbox", "tenant_id, target, row", "%(t)s, 'events', '{}'"),
        ("analytics_event_cursors", "tenant_id, event_id", "%(t)s, %(msg)s"),
        ("events", "tenant_id, workspace_id, message_id, conversation_id, event, trace_id,"
         " span_id, from_agent_id, type, actor, payload_bytes",
         "%(t)s, %(ws)s, %(msg)s, %(cnv)s, 'message.fetched', 'x', 'y', %(agt)s,"
         " 'agentbus.message.v1', 'gateway', 2"),
    ]  # fmt: skip
    # The rows above queued their analytics rows (migration 0021): the seed keeps one of its own.
    first = {
        "analytics_outbox": "WITH gone AS (DELETE FROM analytics_outbox WHERE tenant_id = %(t)s) "
    }
    return [(t, f"{first.get(t, '')}INSERT INTO {t} ({cols}) VALUES ({vals})", p)
            for t, cols, vals in rows]  # fmt: skip


SEEDED_TABLES = [table for table, _sql, _p in seed_statements(uuid.UUID(int=0), "x")]


async def seed_tenant(admin_url: str, slug: str) -> tuple[uuid.UUID, list[Statement]]:
    """A tenant with one row in every tenant table, written as the administrator."""
    tenant_id = uuid7()
    statements = seed_statements(tenant_id, slug)
    async with await AsyncConnection.connect(admin_url) as conn:
        for _table, sql, params in statements:
            await conn.execute(sql, params)
        # One row a table: the seeded event stays, the one the message's trigger wrote goes.
        await conn.execute(
            "DELETE FROM events WHERE tenant_id = %s AND event = 'message.accepted'", (tenant_id,)
        )
        await conn.commit()
    return tenant_id, statements
