"""API tokens and web sessions: minted once, stored as a hash, checked on every use."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from strataplane import errors
from strataplane.actions import members, sessions, teams, tenants, tokens
from strataplane.actions.context import system_ctx
from strataplane.testing import PASSWORD, Seed


async def test_token_is_shown_once_and_only_its_hash_is_stored(
    sp_seed: Seed, strataplane_database: str
) -> None:
    tenant, admin = await sp_seed.tenant()
    created = await tokens.create_token(sp_seed.ctx(admin, tenant.id), "laptop")
    plaintext = created.plaintext
    assert plaintext.startswith("spk_")
    assert len(plaintext) == 4 + 52  # 32 bytes in unpadded base32
    assert created.token.token_prefix == plaintext[:8]
    with psycopg.connect(strataplane_database) as conn:
        stored = conn.execute(
            "SELECT token_hash FROM strataplane.api_token WHERE id = %s", (created.token.id,)
        ).fetchone()
        dump = conn.execute(
            "SELECT string_agg(t::text, '') FROM strataplane.api_token t"
        ).fetchone()
        audit = conn.execute(
            "SELECT string_agg(details::text, '') FROM strataplane.audit_event"
        ).fetchone()
    assert stored == (hashlib.sha256(plaintext.encode()).digest(),)
    assert dump is not None
    assert plaintext[8:] not in dump[0]
    assert audit is not None
    assert plaintext[8:] not in audit[0]
    listed = await tokens.list_tokens(sp_seed.ctx(admin, tenant.id))
    assert [t.id for t in listed] == [created.token.id]


async def test_authenticate_revoke_expire(sp_seed: Seed) -> None:
    tenant, admin = await sp_seed.tenant()
    ctx = sp_seed.ctx(admin, tenant.id)
    created = await tokens.create_token(ctx, "ci", roles=["admin"])
    principal = await tokens.authenticate_token(sp_seed.services, created.plaintext)
    assert (principal.user_id, principal.tenant_id) == (admin.id, tenant.id)
    assert principal.token_roles == frozenset({"admin"})
    other_last = "b" if created.plaintext.endswith("a") else "a"
    for bad in ("spk_short", "nope", created.plaintext[:-1] + other_last):
        with pytest.raises(errors.AuthRequired):
            await tokens.authenticate_token(sp_seed.services, bad)
    await tokens.revoke_token(ctx, created.token.id)
    with pytest.raises(errors.AuthRequired):
        await tokens.authenticate_token(sp_seed.services, created.plaintext)
    soon = datetime.now(UTC) + timedelta(seconds=1)
    short = await tokens.create_token(ctx, "short", expires_at=soon)
    with pytest.raises(errors.InvalidInput):
        await tokens.create_token(ctx, "past", expires_at=datetime.now(UTC) - timedelta(1))
    assert (await tokens.authenticate_token(sp_seed.services, short.plaintext)).token_id
    with psycopg.connect(sp_seed.services.settings.database_url.get_secret_value()) as conn:  # type: ignore[union-attr]
        conn.execute(
            "UPDATE strataplane.api_token SET expires_at = now() - interval '1 s' WHERE id = %s",
            (short.token.id,),
        )
    with pytest.raises(errors.AuthRequired):
        await tokens.authenticate_token(sp_seed.services, short.plaintext)


async def test_allowlist_names_only_held_roles(sp_seed: Seed) -> None:
    tenant, admin = await sp_seed.tenant()
    viewer = await sp_seed.member(sp_seed.ctx(admin, tenant.id), "viewer")
    with pytest.raises(errors.RolesNotHeld) as caught:
        await tokens.create_token(sp_seed.ctx(viewer, tenant.id), "x", roles=["admin"])
    assert caught.value.data["not_held"] == ["admin"]
    mine = await tokens.create_token(sp_seed.ctx(viewer, tenant.id), "x", roles=["viewer"])
    # Others' tokens: invisible to a non-admin, revocable by an admin.
    with pytest.raises(errors.TokenNotFound):
        await tokens.revoke_token(
            sp_seed.ctx(viewer, tenant.id),
            (await tokens.create_token(sp_seed.ctx(admin, tenant.id), "admin's")).token.id,
        )
    with pytest.raises(errors.PermissionDenied):
        await tokens.list_tokens(sp_seed.ctx(viewer, tenant.id), user_id=admin.id)
    revoked = await tokens.revoke_token(sp_seed.ctx(admin, tenant.id), mine.token.id)
    assert revoked.revoked_at is not None


async def test_suspended_tenant_refuses_tokens_and_logins(sp_seed: Seed) -> None:
    tenant, admin = await sp_seed.tenant()
    created = await tokens.create_token(sp_seed.ctx(admin, tenant.id), "cli")
    await tenants.suspend_tenant(system_ctx(sp_seed.services), tenant.id)
    principal = await tokens.authenticate_token(sp_seed.services, created.plaintext)
    with pytest.raises(errors.TenantSuspended):
        await teams.list_teams(sp_seed.ctx(admin, tenant.id, token_id=principal.token_id))
    with pytest.raises(errors.TenantSuspended):
        await sessions.login(
            sp_seed.services, sp_seed.system(), admin.subject, PASSWORD, tenant_id=tenant.id
        )


async def test_login_choose_logout(sp_seed: Seed, strataplane_database: str) -> None:
    tenant, admin = await sp_seed.tenant()
    services, meta = sp_seed.services, sp_seed.system()
    with pytest.raises(errors.InvalidCredentials):
        await sessions.login(services, meta, admin.subject, "wrong password")
    with pytest.raises(errors.InvalidCredentials):
        await sessions.login(services, meta, "nobody", PASSWORD)
    with pytest.raises(errors.PlatformAdminRequired):
        await sessions.login(services, meta, admin.subject, PASSWORD, platform=True)
    new = await sessions.login(services, meta, admin.subject, PASSWORD)
    principal, csrf = await sessions.authenticate_session(services, new.cookie)
    assert (principal.tenant_id, principal.bound, csrf) == (None, False, new.csrf)
    assert [c["id"] for c in await sessions.choices_of(services, admin.id)] == [tenant.id]
    chosen = await sessions.choose(services, meta, principal, tenant_id=tenant.id, platform=False)
    with pytest.raises(errors.AuthRequired):  # choosing replaced the first session
        await sessions.authenticate_session(services, new.cookie)
    bound, _ = await sessions.authenticate_session(services, chosen.cookie)
    assert bound.tenant_id == tenant.id
    with psycopg.connect(strataplane_database) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM strataplane.web_session").fetchall()]
    assert ids == [sessions.session_id(chosen.cookie)]  # never the cookie itself
    await sp_seed.member(sp_seed.ctx(admin, tenant.id), "admin")  # the tenant keeps an admin
    await members.set_member_disabled(sp_seed.ctx(admin, tenant.id), admin.id, True)
    with pytest.raises(errors.MembershipDisabled):  # open sessions end with the membership
        await teams.list_teams(sp_seed.ctx(admin, tenant.id, session_id=bound.session_id))
    await sessions.logout(services, bound)
    with pytest.raises(errors.AuthRequired):
        await sessions.authenticate_session(services, chosen.cookie)
