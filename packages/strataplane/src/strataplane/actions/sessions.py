"""Web sessions (cookie sp_session): login, choosing a tenant or the platform, logout.

A session is bound to the tenant chosen at login, to the platform, or to nothing yet (between
login and the choice). Choosing again replaces the session. The cookie value is random; the
row's id is its SHA-256, and the row's data holds the binding and the CSRF token that unsafe
requests must echo in X-CSRF-Token.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from platformkit.db.scope import platform_transaction, tenant_transaction, transaction
from platformkit.storable import unstorable_reason

from strataplane import errors
from strataplane.actions.access import check_tenant
from strataplane.actions.context import Ctx, Principal, Services
from strataplane.actions.users import check_password
from strataplane.db import SCOPE
from strataplane.store import audit, members, platform_audit, sessions, tenants, users
from strataplane.store.users import User


@dataclass(frozen=True)
class NewSession:
    cookie: str
    csrf: str
    user: User
    tenant_id: UUID | None
    platform: bool
    expires_at: datetime


def session_id(cookie: str) -> str:
    return hashlib.sha256(cookie.encode()).hexdigest()


async def bind(
    services: Services, user: User, tenant_id: UUID | None, platform: bool, meta: Ctx
) -> NewSession:
    """Create the session row, after checking the choice, and audit it in its chain (local
    and OIDC logins alike)."""
    cookie, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
    expires = datetime.now(UTC) + timedelta(hours=services.settings.session_hours)
    data: dict[str, Any] = {
        "user_id": str(user.id),
        "csrf": csrf,
        "platform": platform,
        "tenant_id": str(tenant_id) if tenant_id else None,
    }
    event: dict[str, Any] = {
        "actor_kind": "user",
        "actor_id": str(user.id),
        "action": "session.create",
        "object_kind": "user",
        "object_id": str(user.id),
        "request_id": meta.request_id,
        "source_ip": meta.source_ip,
    }
    if tenant_id is not None:
        async with tenant_transaction(services.pool, SCOPE, tenant_id) as conn:
            await check_tenant(conn, tenant_id)
            member = await members.get_member(conn, tenant_id, user.id)
            if member is None or not member.active:
                raise errors.MembershipDisabled()
            await sessions.insert_session(conn, session_id(cookie), data, expires)
            await audit.append(conn, tenant_id, audit.Event(**event))
    else:
        if platform and not user.platform_admin:
            raise errors.PlatformAdminRequired()
        async with platform_transaction(services.pool, SCOPE) as conn:
            await sessions.insert_session(conn, session_id(cookie), data, expires)
            await platform_audit.append(
                conn, platform_audit.PlatformEvent(**event, details={"platform": platform})
            )
    return NewSession(cookie, csrf, user, tenant_id, platform, expires)


async def login(
    services: Services,
    meta: Ctx,
    username: str,
    password: str,
    *,
    tenant_id: UUID | None = None,
    platform: bool = False,
) -> NewSession:
    """Check the password, then open a session bound to the tenant, the platform, or (neither
    given) nothing yet. ``meta`` carries the request id and source address.

    Sign-in is throttled per username and per source address (platformkit.signin): while
    either is locked the answer is SignInThrottled with Retry-After, and the password is not
    looked at. Failures against an existing account and every lock are audited in the
    platform chain; a failure for a name that is no account is counted but not audited."""
    wait = await services.sign_in.check(services.pool, username, meta.source_ip)
    if wait is not None:
        raise errors.SignInThrottled(headers={"Retry-After": str(wait)})
    async with transaction(services.pool) as conn:
        checked = await check_password(services, conn, username, password)
    if not checked.ok or checked.user is None:
        await _failed(services, meta, username, checked.user)
        raise errors.InvalidCredentials()
    await services.sign_in.success(services.pool, username)
    return await bind(services, checked.user, tenant_id, platform, meta)


async def _failed(services: Services, meta: Ctx, username: str, user: User | None) -> None:
    failure = await services.sign_in.failure(services.pool, username, meta.source_ip)
    actions = ["session.login_failed"] if user is not None else []
    if failure.locked:
        actions.append("session.login_locked")
    if not actions:
        return
    async with platform_transaction(services.pool, SCOPE) as conn:
        for action in actions:
            await platform_audit.append(
                conn,
                platform_audit.PlatformEvent(
                    actor_kind="system",
                    actor_id=None,
                    action=action,
                    object_kind="user" if user is not None else "sign_in",
                    object_id=str(user.id) if user is not None else "unknown_account",
                    request_id=meta.request_id,
                    source_ip=meta.source_ip,
                    details=failure.details(),
                ),
            )


async def choose(
    services: Services,
    meta: Ctx,
    principal: Principal,
    *,
    tenant_id: UUID | None,
    platform: bool,
) -> NewSession:
    """Bind anew (tenant or platform), replacing the current session."""
    if principal.session_id is None:
        raise errors.AuthRequired("choosing a tenant needs a web session")
    async with transaction(services.pool) as conn:
        user = await users.get_user(conn, principal.user_id)
    if user is None or user.disabled_at is not None:
        raise errors.AuthRequired()
    new = await bind(services, user, tenant_id, platform, meta)
    async with transaction(services.pool) as conn:
        await sessions.delete_session(conn, principal.session_id)
    return new


async def logout(services: Services, principal: Principal) -> None:
    if principal.session_id is not None:
        async with transaction(services.pool) as conn:
            await sessions.delete_session(conn, principal.session_id)


async def choices_of(services: Services, user_id: UUID) -> list[dict[str, object]]:
    """The tenants the user can choose at login (platform scope)."""
    async with platform_transaction(services.pool, SCOPE) as conn:
        return await members.active_tenants_of(conn, user_id)


async def authenticate_session(services: Services, cookie: str) -> tuple[Principal, str]:
    """The principal behind a session cookie, and the session's CSRF token."""
    async with transaction(services.pool) as conn:
        found = await sessions.get_session(conn, session_id(cookie))
        if found is None:
            raise errors.AuthRequired("no valid session")
        user = await users.get_user(conn, UUID(found.data["user_id"]))
    if user is None or user.disabled_at is not None or user.kind != "human":
        raise errors.AuthRequired("no valid session")
    tenant = found.data.get("tenant_id")
    principal = Principal(
        user_id=user.id,
        kind=user.kind,
        display_name=user.display_name,
        platform_admin=user.platform_admin,
        tenant_id=UUID(tenant) if tenant else None,
        bound=bool(tenant) or bool(found.data.get("platform")),
        session_id=found.id,
    )
    return principal, str(found.data.get("csrf", ""))


async def resolve_tenant(services: Services, ref: str) -> UUID:
    """A tenant named by slug or id (tenant has no row-level security: slugs are public)."""
    if unstorable_reason(ref) is not None or len(ref) > 200:  # no slug holds these
        raise errors.TenantNotFound(field="tenant")
    async with transaction(services.pool) as conn:
        try:
            tenant = await tenants.get_tenant(conn, UUID(ref))
        except ValueError:
            tenant = await tenants.get_tenant_by_slug(conn, ref)
    if tenant is None:
        raise errors.TenantNotFound(field="tenant")
    return tenant.id
