"""Members, teams, service accounts and role bindings through the actions."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from strataplane import errors
from strataplane.actions import bindings, invitations, members, service_accounts, teams, tokens
from strataplane.testing import PASSWORD, Seed


async def test_members_add_disable_remove(sp_seed: Seed, strataplane_database: str) -> None:
    tenant, admin = await sp_seed.tenant()
    other, other_admin = await sp_seed.tenant()
    ctx = sp_seed.ctx(admin, tenant.id)
    bob = await sp_seed.member(ctx, "viewer")
    with psycopg.connect(strataplane_database) as conn:
        stored = conn.execute(
            "SELECT password_hash FROM strataplane.app_user WHERE id = %s", (bob.id,)
        ).fetchone()
    assert stored is not None
    assert stored[0].startswith("$argon2id$")
    assert PASSWORD not in stored[0]
    with pytest.raises(errors.AlreadyMember):
        await invitations.invite_member(ctx, bob.id)
    # The same user joins another tenant; disabling here leaves that membership alone.
    invited = await invitations.invite_member(sp_seed.ctx(other_admin, other.id), bob.id)
    bob_anywhere = sp_seed.ctx(bob, tenant.id)
    await invitations.answer_invitation(
        bob_anywhere, sp_seed.principal(bob, tenant.id), invited.id, accept=True
    )
    await bindings.create_role_binding(
        sp_seed.ctx(other_admin, other.id), role="viewer", user_id=bob.id
    )
    bob_here, bob_there = sp_seed.ctx(bob, tenant.id), sp_seed.ctx(bob, other.id)
    assert await teams.list_teams(bob_here) == []
    await members.set_member_disabled(ctx, bob.id, True)
    with pytest.raises(errors.MembershipDisabled):
        await teams.list_teams(bob_here)
    assert await teams.list_teams(bob_there) == []
    await members.set_member_disabled(ctx, bob.id, False)
    await tokens.create_token(bob_here, "cli")
    await members.remove_member(ctx, bob.id)
    with psycopg.connect(strataplane_database) as conn:
        left = conn.execute(
            "SELECT (SELECT count(*) FROM strataplane.role_binding WHERE user_id = %(u)s "
            "AND tenant_id = %(t)s) + (SELECT count(*) FROM strataplane.api_token "
            "WHERE user_id = %(u)s)",
            {"u": bob.id, "t": tenant.id},
        ).fetchone()
    assert left == (0,)
    with pytest.raises(errors.MemberNotFound):
        await members.remove_member(ctx, bob.id)


async def test_only_tenant_admins_manage(sp_seed: Seed) -> None:
    tenant, admin = await sp_seed.tenant()
    viewer = await sp_seed.member(sp_seed.ctx(admin, tenant.id), "viewer")
    with pytest.raises(errors.PermissionDenied) as caught:
        await teams.create_team(sp_seed.ctx(viewer, tenant.id), "sre", "SRE")
    assert caught.value.data["permission"] == "tenant.admin"
    # An admin acting through a token restricted to viewer is a viewer.
    restricted = sp_seed.ctx(admin, tenant.id, token_roles=frozenset({"viewer"}))
    with pytest.raises(errors.PermissionDenied):
        await teams.create_team(restricted, "sre", "SRE")


async def test_teams(sp_seed: Seed) -> None:
    tenant, admin = await sp_seed.tenant()
    ctx = sp_seed.ctx(admin, tenant.id)
    team = await teams.create_team(ctx, "sre", "SRE")
    with pytest.raises(errors.TeamSlugTaken):
        await teams.create_team(ctx, "sre", "Again")
    with pytest.raises(errors.InvalidSlug):
        await teams.create_team(ctx, "-bad", "Bad")
    assert (await teams.update_team(ctx, team.id, display_name="Ops")).display_name == "Ops"
    await teams.add_team_member(ctx, team.id, admin.id)
    with pytest.raises(errors.AlreadyTeamMember):
        await teams.add_team_member(ctx, team.id, admin.id)
    account = await service_accounts.create_service_account(ctx, "ci")
    with pytest.raises(errors.NotHuman):
        await teams.add_team_member(ctx, team.id, account.id)
    binding = await bindings.create_role_binding(
        ctx, role="author", team_id=team.id, scope_kind="owner", scope_team_id=team.id
    )
    with pytest.raises(errors.TeamInUse):
        await teams.delete_team(ctx, team.id)
    await bindings.delete_role_binding(ctx, binding.id)
    await teams.delete_team(ctx, team.id)
    with pytest.raises(errors.TeamNotFound):
        await teams.access_team(ctx, team.id)


async def test_team_bindings_reach_members(sp_seed: Seed) -> None:
    tenant, admin = await sp_seed.tenant()
    ctx = sp_seed.ctx(admin, tenant.id)
    carol = await sp_seed.member(ctx)
    team = await teams.create_team(ctx, "sre", "SRE")
    with pytest.raises(errors.PermissionDenied):  # a member without any role
        await tokens.create_token(sp_seed.ctx(carol, tenant.id), "cli")
    await bindings.create_role_binding(ctx, role="operator", team_id=team.id)
    await teams.add_team_member(ctx, team.id, carol.id)
    created = await tokens.create_token(sp_seed.ctx(carol, tenant.id), "cli", roles=["operator"])
    assert created.token.roles == ["operator"]


async def test_role_binding_rules(sp_seed: Seed) -> None:
    tenant, admin = await sp_seed.tenant()
    ctx = sp_seed.ctx(admin, tenant.id)
    dave = await sp_seed.member(ctx)
    team = await teams.create_team(ctx, "sre", "SRE")
    with pytest.raises(errors.InvalidScope):
        await bindings.create_role_binding(
            ctx, role="admin", user_id=dave.id, scope_kind="owner", scope_team_id=team.id
        )
    with pytest.raises(errors.InvalidScope):
        await bindings.create_role_binding(
            ctx,
            role="viewer",
            user_id=dave.id,
            scope_kind="selector",
            scope_selector={"matchLabels": {"os": 1}},
        )
    with pytest.raises(errors.MemberNotFound):
        await bindings.create_role_binding(ctx, role="viewer", user_id=uuid.uuid4())
    with pytest.raises(errors.InvalidInput):
        await bindings.create_role_binding(ctx, role="viewer", user_id=dave.id, team_id=team.id)
    selector = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["dmz"]}]}
    first = await bindings.create_role_binding(
        ctx, role="operator", user_id=dave.id, scope_kind="selector", scope_selector=selector
    )
    with pytest.raises(errors.RoleBindingExists):
        await bindings.create_role_binding(
            ctx, role="operator", user_id=dave.id, scope_kind="selector", scope_selector=selector
        )
    assert [b.id for b in await bindings.list_role_bindings(ctx, user_id=dave.id)] == [first.id]


async def test_service_account_deletion_refused_once_it_acted(
    sp_seed: Seed, strataplane_database: str
) -> None:
    tenant, admin = await sp_seed.tenant()
    ctx = sp_seed.ctx(admin, tenant.id)
    idle = await service_accounts.create_service_account(ctx, "idle")
    await bindings.create_role_binding(ctx, role="author", user_id=idle.id)
    await service_accounts.delete_service_account(ctx, idle.id)
    with pytest.raises(errors.ServiceAccountNotFound):
        await service_accounts.access_service_account(ctx, idle.id)

    ci = await service_accounts.create_service_account(ctx, "ci", description="pipeline")
    with psycopg.connect(strataplane_database) as conn:  # ci authored a change set
        conn.execute(
            "INSERT INTO strataplane.change_set (id, tenant_id, number, title, author_id, "
            "base_revision_id, digest) VALUES (%s, %s, 1, 'x', %s, 1, '\\x00')",
            (uuid.uuid4(), tenant.id, ci.id),
        )
        user = conn.execute(
            "SELECT kind, issuer, subject FROM strataplane.app_user WHERE id = %s", (ci.id,)
        ).fetchone()
    assert user == ("service", "service", str(ci.id))
    with pytest.raises(errors.ServiceAccountInUse) as caught:
        await service_accounts.delete_service_account(ctx, ci.id)
    assert caught.value.code == "service_account.in_use"
    assert caught.value.data["references"] == ["change_set.author_id"]
    with pytest.raises(errors.ServiceAccountNameTaken):
        await service_accounts.create_service_account(ctx, "ci")
