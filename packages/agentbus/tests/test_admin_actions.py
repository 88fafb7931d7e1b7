"""The actions behind the admin CLI, as the gateway will call them: tenant creation with its
key, subscription and owner; role checks for user actors; cross-tenant NotFound; token rules;
verify_integration_token's checks in order; the tenant_keys data key store."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from agentbus import db
from agentbus.actions import tenants, tokens, users, workspaces
from agentbus.actions.context import Actor, Ctx
from agentbus.errors import (
    AlreadyExists,
    NotFound,
    RequestInvalid,
    RoleRequired,
    StateConflict,
    TenantSuspended,
    TokenInvalid,
)
from agentbus.keys import PLATFORM_KEK, TenantKeyStore, kek_id_of
from agentbus.store import integration_tokens
from platformkit.crypto import Envelope, Keyring, new_data_key
from platformkit.db.scope import Pool, tenant_transaction
from platformkit.ids import uuid7

OWNER = users.OwnerSpec("ops@acme.example", "oidc:https://login.acme.example", "00u1")


async def test_create_tenant_writes_every_row(agentbus_operator: Ctx, agentbus_db: str) -> None:
    created = await tenants.create_tenant(
        agentbus_operator, slug="acme", display_name="Acme Corp", plan="business", owner=OWNER
    )
    t = created.tenant
    assert (t["plan"], t["status"], t["retention_days"]) == ("business", "active", 90)
    assert t["nats_stream"] == f"T_{t['id'].hex}"
    assert t["kek_ref"] == PLATFORM_KEK
    assert created.owner_user is not None
    assert created.owner_user["tenant_role"] == "owner"
    boot = created.bootstrap_token
    assert boot is not None
    assert boot.row["scopes"] == list(integration_tokens.SCOPES)
    assert boot.row["workspace_id"] is None
    assert boot.plaintext.startswith("ab_live_")
    assert boot.plaintext not in repr(boot)
    with psycopg.connect(agentbus_db) as conn:
        keys = conn.execute(
            "SELECT version, status, kek_ref, kek_provider FROM tenant_keys"
        ).fetchall()
        subs = conn.execute("SELECT plan::text FROM subscriptions").fetchall()
    assert keys == [(1, "active", f"{PLATFORM_KEK}/1", "platform")]
    assert subs == [("business",)]
    with pytest.raises(AlreadyExists):
        await tenants.create_tenant(agentbus_operator, slug="acme", display_name="Again")
    with pytest.raises(RequestInvalid):
        await tenants.create_tenant(agentbus_operator, slug="No_Caps", display_name="x")


async def test_user_actors_are_held_to_roles_and_their_tenant(agentbus_operator: Ctx) -> None:
    a = await tenants.create_tenant(
        agentbus_operator, slug="tenant-a", display_name="A", owner=OWNER
    )
    b = await tenants.create_tenant(
        agentbus_operator, slug="tenant-b", display_name="B", owner=OWNER
    )
    assert a.owner_user is not None
    assert b.owner_user is not None
    ta, tb = a.tenant["id"], b.tenant["id"]
    owner_a = Ctx(agentbus_operator.pool, Actor.user(ta, a.owner_user["id"]))
    member = await users.create_user(
        owner_a, ta, users.OwnerSpec("m@acme.example", "oidc:x", "m1"), role="member"
    )
    as_member = Ctx(agentbus_operator.pool, Actor.user(ta, member["id"]))
    with pytest.raises(NotFound):  # another tenant's id looks like no tenant at all
        await workspaces.list_workspaces(owner_a, tb)
    with pytest.raises(RoleRequired):
        await tokens.create_integration_token(as_member, ta, owner_user_id=member["id"], name="x")
    with pytest.raises(RoleRequired):
        await tenants.list_tenants(owner_a)
    ws = await workspaces.create_workspace(owner_a, ta, slug="platform", display_name="Platform")
    with pytest.raises(RoleRequired):  # tenant-wide tokens belong to tenant admins only
        await tokens.create_integration_token(owner_a, ta, owner_user_id=member["id"], name="x")
    issued = await tokens.create_integration_token(
        owner_a, ta, owner_user_id=member["id"], name="laptop", workspace_id=ws["id"]
    )
    assert issued.row["scopes"] == ["send", "receive", "register"]
    with pytest.raises(NotFound):
        await tokens.revoke_integration_token(owner_a, ta, uuid7())


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"scopes": ["send", "teleport"]}, "scopes"),
        ({"scopes": []}, "scopes"),
        ({"env": "prod"}, "env"),
        ({"name": "  "}, "name"),
        ({"expires_at": datetime.now(UTC) - timedelta(minutes=1)}, "expires_at"),
    ],
)
async def test_token_input_is_checked(
    agentbus_operator: Ctx, kwargs: dict[str, object], field: str
) -> None:
    t = await tenants.create_tenant(
        agentbus_operator, slug="tenant-c", display_name="C", owner=OWNER
    )
    assert t.owner_user is not None
    args: dict[str, object] = {"name": "ok", **kwargs}
    with pytest.raises(RequestInvalid) as info:
        await tokens.create_integration_token(
            agentbus_operator,
            t.tenant["id"],
            owner_user_id=t.owner_user["id"],
            **args,  # type: ignore[arg-type]
        )
    assert info.value.data["field"] == field


async def test_verify_checks_in_order(agentbus_operator: Ctx, agentbus_db: str) -> None:
    t = await tenants.create_tenant(
        agentbus_operator, slug="tenant-d", display_name="D", owner=OWNER
    )
    boot = t.bootstrap_token
    assert boot is not None
    pool = agentbus_operator.pool
    ok = await integration_tokens.verify_integration_token(pool, boot.plaintext, ip="192.0.2.1")
    assert ok.tenant_id == t.tenant["id"]
    assert "admin" in ok.scopes
    with psycopg.connect(agentbus_db) as conn:
        used = conn.execute(
            "SELECT last_used_at, host(last_used_ip) FROM integration_tokens"
        ).fetchone()
    assert used is not None
    assert used[0] is not None
    assert used[1] == "192.0.2.1"
    with pytest.raises(TokenInvalid):  # well formed, unknown
        await integration_tokens.verify_integration_token(pool, "ab_live_" + "A" * 40)
    await tenants.suspend_tenant(agentbus_operator, t.tenant["id"])
    with pytest.raises(TenantSuspended):
        await integration_tokens.verify_integration_token(pool, boot.plaintext)


async def test_a_suspended_tenant_resumes(agentbus_operator: Ctx, agentbus_db: str) -> None:
    t = await tenants.create_tenant(
        agentbus_operator, slug="tenant-r", display_name="R", owner=OWNER
    )
    boot, tid, pool = t.bootstrap_token, t.tenant["id"], agentbus_operator.pool
    assert boot is not None
    with pytest.raises(StateConflict):  # not suspended
        await tenants.resume_tenant(agentbus_operator, tid)
    await tenants.suspend_tenant(agentbus_operator, tid)
    with pytest.raises(TenantSuspended):
        await integration_tokens.verify_integration_token(pool, boot.plaintext)
    resumed = await tenants.resume_tenant(agentbus_operator, tid, reason="paid")
    assert resumed["status"] == "active"
    verified = await integration_tokens.verify_integration_token(pool, boot.plaintext)
    assert verified.tenant_id == tid
    with psycopg.connect(agentbus_db) as conn:
        actions = conn.execute(
            "SELECT action, details->>'reason' FROM audit_actions"
            " WHERE action IN ('tenant.suspend', 'tenant.resume') ORDER BY at, id"
        ).fetchall()
    assert actions == [("tenant.suspend", None), ("tenant.resume", "paid")]


@pytest.mark.parametrize(
    "candidate",
    ["", "ab_live_short", "ab_prod_" + "a" * 40, "ab_live_" + "a" * 39 + "-", "Bearer ab_live_x"],
)
async def test_malformed_tokens_never_reach_the_database(candidate: str) -> None:
    closed: Pool = None  # type: ignore[assignment]  # any database use would fail loudly
    with pytest.raises(TokenInvalid):
        await integration_tokens.verify_integration_token(closed, candidate)


async def test_tenant_key_store_rotates_and_shreds(
    agentbus_operator: Ctx, agentbus_keyring: Keyring
) -> None:
    t = await tenants.create_tenant(agentbus_operator, slug="tenant-e", display_name="E")
    tid: uuid.UUID = t.tenant["id"]
    store = TenantKeyStore(agentbus_operator.pool)
    envelope = Envelope(agentbus_keyring, store)
    sealed = await envelope.encrypt(tid, b"payload", owner="test:1")
    assert await envelope.decrypt(tid, sealed, owner="test:1") == b"payload"
    assert await envelope.rotate_tenant_key(tid) == 2
    active = await store.get_active(tid)
    assert active is not None
    assert active.key_id == 2
    assert kek_id_of(f"{PLATFORM_KEK}/{active.wrapped.kek_id}") == agentbus_keyring.active_id
    assert await envelope.decrypt(tid, sealed, owner="test:1") == b"payload"  # v1 still opens
    await envelope.delete_tenant_keys(tid)
    assert await store.get_active(tid) is None
    assert await store.get(tid, 1) is None
    async with tenant_transaction(agentbus_operator.pool, db.SCOPE, tid) as conn:
        rows = await (
            await conn.execute("SELECT status, dek_wrapped FROM tenant_keys ORDER BY version")
        ).fetchall()
    assert [r["status"] for r in rows] == ["destroyed", "destroyed"]
    assert all(set(bytes(r["dek_wrapped"])) == {0} for r in rows)


async def test_tenant_key_cache_is_short_lived_and_dropped_by_its_own_changes(
    agentbus_operator: Ctx, agentbus_keyring: Keyring
) -> None:
    t = await tenants.create_tenant(agentbus_operator, slug="tenant-k", display_name="K")
    tid: uuid.UUID = t.tenant["id"]
    cached = TenantKeyStore(agentbus_operator.pool, ttl_s=0.3)
    elsewhere = TenantKeyStore(agentbus_operator.pool)
    first = await cached.get_active(tid)
    assert first is not None
    assert await cached.get(tid, first.key_id) == first
    await elsewhere.delete(tid)  # another process shreds the keys
    assert await cached.get_active(tid) == first  # still remembered, for at most ttl_s
    await asyncio.sleep(0.35)
    assert await cached.get_active(tid) is None
    assert await cached.get(tid, first.key_id) is None
    second = await cached.put(tid, new_data_key(agentbus_keyring, tid))
    assert await cached.get_active(tid) == second
    await cached.delete(tid)  # this store's own change takes effect at once
    assert await cached.get_active(tid) is None
