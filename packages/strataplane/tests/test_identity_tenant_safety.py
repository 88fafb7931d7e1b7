"""A tenant never loses its last admin, a platform admin restores one, and an existing user
joins a tenant only by accepting an invitation (which tells the tenant nothing about them)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from fastapi import FastAPI
from strataplane import errors
from strataplane.actions import bindings, invitations, members, teams, tenant_admins, tokens
from strataplane.testing import Seed, client_for


async def _admin_binding(seed: Seed, tenant_id: uuid.UUID, user_id: uuid.UUID) -> uuid.UUID:
    found = await bindings.list_role_bindings(seed.system().in_tenant(tenant_id), user_id=user_id)
    return next(b.id for b in found if b.role == "admin")


async def test_the_last_admin_stays(sp_seed: Seed) -> None:
    tenant, admin = await sp_seed.tenant()
    ctx = sp_seed.ctx(admin, tenant.id)
    own = await _admin_binding(sp_seed, tenant.id, admin.id)
    for refused in (
        bindings.delete_role_binding(ctx, own),
        members.remove_member(ctx, admin.id),
        members.set_member_disabled(ctx, admin.id, True),
    ):
        with pytest.raises(errors.LastAdmin):
            await refused
    assert await _admin_binding(sp_seed, tenant.id, admin.id) == own
    # With a second admin (here through a team) the first may go.
    team = await teams.create_team(ctx, "admins", "Admins")
    second = await sp_seed.member(ctx)
    await teams.add_team_member(ctx, team.id, second.id)
    await bindings.create_role_binding(ctx, role="admin", team_id=team.id)
    await bindings.delete_role_binding(ctx, own)
    second_ctx = sp_seed.ctx(second, tenant.id)
    with pytest.raises(errors.LastAdmin):
        await teams.remove_team_member(second_ctx, team.id, second.id)
    with pytest.raises(errors.LastAdmin):
        await teams.delete_team(second_ctx, team.id)


async def test_two_admins_removing_each_other_leave_one(sp_seed: Seed) -> None:
    tenant, first = await sp_seed.tenant()
    ctx = sp_seed.ctx(first, tenant.id)
    second = await sp_seed.member(ctx, "admin")
    results = await asyncio.gather(
        members.remove_member(ctx, second.id),
        members.remove_member(sp_seed.ctx(second, tenant.id), first.id),
        return_exceptions=True,
    )
    assert sum(isinstance(r, BaseException) for r in results) == 1, results
    left = await members.list_members(sp_seed.system().in_tenant(tenant.id))
    assert len(left) == 1


async def test_a_platform_admin_restores_an_admin(sp_seed: Seed) -> None:
    tenant, admin = await sp_seed.tenant()
    root = await sp_seed.user("root", platform_admin=True)
    helper = await sp_seed.user("helper")
    platform = sp_seed.ctx(root, None)
    assert await tenant_admins.restore_tenant_admin(platform, tenant.id, helper.id)
    assert not await tenant_admins.restore_tenant_admin(platform, tenant.id, helper.id)
    await members.remove_member(sp_seed.ctx(helper, tenant.id), admin.id)
    assert await teams.list_teams(sp_seed.ctx(helper, tenant.id)) == []
    with pytest.raises(errors.PlatformAdminRequired):
        await tenant_admins.restore_tenant_admin(sp_seed.ctx(helper, None), tenant.id, admin.id)


async def test_members_join_by_invitation_only(sp_seed: Seed) -> None:
    tenant, admin = await sp_seed.tenant()
    other, other_admin = await sp_seed.tenant()
    ctx = sp_seed.ctx(admin, tenant.id)
    carol = await sp_seed.user("carol")
    invited = await invitations.invite_member(ctx, carol.id)
    assert not hasattr(invited, "email")
    assert [i.id for i in await invitations.list_invitations(ctx)] == [invited.id]
    with pytest.raises(errors.MembershipDisabled):
        await teams.list_teams(sp_seed.ctx(carol, tenant.id))
    # Another user (an admin of another tenant, here) cannot answer it.
    stranger, stranger_p = (
        sp_seed.ctx(other_admin, other.id),
        sp_seed.principal(other_admin, other.id),
    )
    with pytest.raises(errors.InvitationNotFound):
        await invitations.answer_invitation(stranger, stranger_p, invited.id, accept=True)
    assert await invitations.list_invitations(stranger) == []
    carol_ctx, carol_p = sp_seed.ctx(carol, None, bound=False), sp_seed.principal(carol, None)
    seen = await invitations.received_invitations(carol_ctx, carol_p)
    assert [(i.id, i.tenant_slug) for i in seen] == [(invited.id, tenant.slug)]
    await invitations.answer_invitation(carol_ctx, carol_p, invited.id, accept=True)
    assert (await members.access_member(ctx, carol.id)).source == "local"
    with pytest.raises(errors.InvitationNotFound):  # used
        await invitations.answer_invitation(carol_ctx, carol_p, invited.id, accept=True)
    dave = await sp_seed.user("dave")
    declined = await invitations.invite_member(ctx, dave.id)
    dave_ctx, dave_p = sp_seed.ctx(dave, None, bound=False), sp_seed.principal(dave, None)
    await invitations.answer_invitation(dave_ctx, dave_p, declined.id, accept=False)
    with pytest.raises(errors.MemberNotFound):
        await members.access_member(ctx, dave.id)
    revoked = await invitations.invite_member(ctx, dave.id)
    await invitations.revoke_invitation(ctx, revoked.id)
    with pytest.raises(errors.InvitationNotFound):
        await invitations.answer_invitation(dave_ctx, dave_p, revoked.id, accept=True)
    with pytest.raises(errors.UserNotFound):
        await invitations.invite_member(ctx, uuid.uuid4())


async def test_the_api_refuses_a_bare_user_id_and_keeps_details(sp_app: FastAPI) -> None:
    seed = Seed(sp_app.state.services)
    tenant, admin = await seed.tenant()
    erin = await seed.user("erin")
    admin_token = (await tokens.create_token(seed.ctx(admin, tenant.id), "t")).plaintext
    async with client_for(sp_app, admin_token) as http:
        bare = await http.post("/api/v1/members", json={"user_id": str(erin.id)})
        assert bare.status_code == 422
        assert bare.json()["code"] == "member.invitation_required"
        made = await http.post("/api/v1/invitations", json={"user_id": str(erin.id)})
        assert made.status_code == 201, made.text
        assert set(made.json()) == {"id", "user_id", "created_by", "created_at", "expires_at"}
        last = await http.delete(
            f"/api/v1/role-bindings/{await _admin_binding(seed, tenant.id, admin.id)}"
        )
        assert last.status_code == 409
        assert last.json()["code"] == "tenant.last_admin"
    login = {"username": "erin", "password": "correct horse battery staple"}
    async with client_for(sp_app) as http:
        signed_in = await http.post("/api/v1/auth/login", json=login)
        assert signed_in.status_code == 200, signed_in.text
        csrf = {"X-CSRF-Token": signed_in.json()["csrf_token"]}
        pending = (await http.get("/api/v1/me/invitations")).json()
        assert [p["tenant_slug"] for p in pending] == [tenant.slug]
        accepted = await http.post(
            f"/api/v1/me/invitations/{pending[0]['id']}/accept", headers=csrf
        )
        assert accepted.status_code == 200, accepted.text
    async with client_for(sp_app, admin_token) as http:
        member = await http.get(f"/api/v1/members/{erin.id}")
        assert member.status_code == 200
        assert member.json()["display_name"] == "Erin"


async def test_restore_through_the_platform_api(sp_app: FastAPI) -> None:
    seed = Seed(sp_app.state.services)
    tenant, _admin = await seed.tenant()
    root = await seed.user("root", platform_admin=True)
    frank = await seed.user("frank")
    token = (await tokens.create_platform_token(seed.ctx(root, None), "p")).plaintext
    async with client_for(sp_app, token) as http:
        done = await http.post(
            f"/api/v1/platform/tenants/{tenant.id}/admins", json={"user_id": str(frank.id)}
        )
        assert done.status_code == 200, done.text
        assert done.json()["changed"] is True
        missing = await http.post(
            f"/api/v1/platform/tenants/{uuid.uuid4()}/admins", json={"user_id": str(frank.id)}
        )
        assert missing.status_code == 404
