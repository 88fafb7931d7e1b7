"""Tenant lifecycle by platform admins: creation (counters, r1, shard, first admin),
suspension, resumption and deletion through the operation's job."""

from __future__ import annotations

import hashlib

import psycopg
import pytest
from strataplane import errors
from strataplane.actions import jobs, teams, tenants
from strataplane.testing import Seed


async def test_create_writes_counters_r1_and_the_first_admin(
    sp_seed: Seed, strataplane_database: str
) -> None:
    tenant, admin = await sp_seed.tenant("acme")
    assert tenant.state == "active"
    assert 0 <= tenant.shard < 4
    with psycopg.connect(strataplane_database, options="-c search_path=strataplane") as conn:
        counters: dict[str, int] = dict(
            conn.execute(
                "SELECT name, value FROM tenant_counter WHERE tenant_id = %s", (tenant.id,)
            ).fetchall()
        )
        r1 = conn.execute(
            "SELECT id, tree_hash, message, created_by FROM spec_revision WHERE tenant_id = %s",
            (tenant.id,),
        ).fetchall()
        binding = conn.execute(
            "SELECT role::text, scope_kind FROM role_binding WHERE tenant_id = %s AND user_id = %s",
            (tenant.id, admin.id),
        ).fetchall()
        platform = conn.execute(
            "SELECT action, tenant_id FROM platform_audit_event ORDER BY id DESC LIMIT 1"
        ).fetchone()
    assert counters["revision"] == 1
    assert counters["change_set"] == counters["rollout"] == 0
    assert counters["audit"] == 3  # tenant.create, member.add, role_binding.create
    assert r1 == [(1, hashlib.sha256(b"").digest(), "Initial empty revision", None)]
    assert binding == [("admin", "tenant")]
    assert platform == ("tenant.create", tenant.id)


async def test_slug_rules(sp_seed: Seed) -> None:
    await sp_seed.tenant("acme")
    with pytest.raises(errors.TenantSlugTaken):
        await sp_seed.tenant("acme")
    for bad in ("Acme", "-acme", "acme-", "a" * 33, ""):
        with pytest.raises(errors.InvalidSlug):
            await tenants.create_tenant(sp_seed.system(), bad, "x")


async def test_only_platform_admins_with_a_platform_credential(sp_seed: Seed) -> None:
    tenant, admin = await sp_seed.tenant()
    with pytest.raises(errors.PlatformAdminRequired):
        await tenants.create_tenant(sp_seed.ctx(admin, None), "other", "Other")
    root = await sp_seed.user("root", platform_admin=True)
    with pytest.raises(errors.PlatformAdminRequired):  # a tenant credential is not enough
        await tenants.suspend_tenant(sp_seed.ctx(root, tenant.id), tenant.id)
    created = await tenants.create_tenant(sp_seed.ctx(root, None), "other", "Other")
    assert created.slug == "other"


async def test_suspend_blocks_members_and_resume_restores(sp_seed: Seed) -> None:
    tenant, admin = await sp_seed.tenant()
    ctx = sp_seed.ctx(admin, tenant.id)
    suspended = await tenants.suspend_tenant(sp_seed.system(), tenant.id)
    assert suspended.state == "suspended"
    assert (await tenants.suspend_tenant(sp_seed.system(), tenant.id)).state == "suspended"
    with pytest.raises(errors.TenantSuspended):
        await teams.list_teams(ctx)
    await tenants.resume_tenant(sp_seed.system(), tenant.id)
    assert await teams.list_teams(ctx) == []


async def test_delete_rejects_requests_then_purges(
    sp_seed: Seed, strataplane_database: str
) -> None:
    tenant, admin = await sp_seed.tenant()
    other, _ = await sp_seed.tenant()
    ctx = sp_seed.ctx(admin, tenant.id)
    await teams.create_team(ctx, "sre", "SRE")
    op = await tenants.delete_tenant(sp_seed.system(), tenant.id)
    assert (op.kind, op.state, op.tenant_id) == ("tenant.delete", "queued", None)
    assert (await tenants.delete_tenant(sp_seed.system(), tenant.id)).id == op.id
    with pytest.raises(errors.TenantDeleting):
        await teams.list_teams(ctx)
    with pytest.raises(errors.TenantInvalidState):
        await tenants.resume_tenant(sp_seed.system(), tenant.id)
    result = await jobs.run_tenant_deletion(sp_seed.services.pool, op.id, tenant.id)
    assert result["deleted"]["team"] == 1
    done = await tenants.access_platform_operation(sp_seed.system(), op.id)
    assert (done.state, done.progress) == ("succeeded", 1.0)
    with psycopg.connect(strataplane_database, options="-c search_path=strataplane") as conn:
        left = conn.execute(
            "SELECT (SELECT count(*) FROM tenant WHERE id = %(t)s) + "
            "(SELECT count(*) FROM audit_event WHERE tenant_id = %(t)s) + "
            "(SELECT count(*) FROM tenant_member WHERE tenant_id = %(t)s)",
            {"t": tenant.id},
        ).fetchone()
        kept = conn.execute(
            "SELECT count(*) FROM platform_audit_event WHERE tenant_id = %s", (tenant.id,)
        ).fetchone()
        others = conn.execute(
            "SELECT count(*) FROM tenant_member WHERE tenant_id = %s", (other.id,)
        ).fetchone()
    assert left == (0,)
    assert kept is not None
    assert kept[0] >= 3
    assert others == (1,)
    with pytest.raises(errors.TenantNotFound):
        await tenants.delete_tenant(sp_seed.system(), tenant.id)
