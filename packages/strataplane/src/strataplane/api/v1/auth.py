"""Login with a local username and password, choosing a tenant or the platform, logout.

The session travels in the ``sp_session`` cookie (HttpOnly, SameSite=Lax); the response body
carries the CSRF token that session requests which change something send in X-CSRF-Token.
Login returns a credential, so it takes no Idempotency-Key.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from fastapi import APIRouter, Depends, Request, Response
from platformkit.http import no_idempotency_key
from platformkit.http.cookies import CookiePolicy

from strataplane.actions import sessions
from strataplane.actions.sessions import NewSession
from strataplane.agents.settings import FleetSettings
from strataplane.api.deps import COOKIE, CurrentPrincipal, request_meta, services_of
from strataplane.api.v1.common import Model

router = APIRouter(prefix="/auth", tags=["auth"])


class LoginIn(Model):
    username: str
    password: str
    tenant: str | None = None
    platform: bool = False


class ChooseIn(Model):
    tenant: str | None = None
    platform: bool = False


class TenantChoice(Model):
    id: UUID
    slug: str
    display_name: str


class SessionOut(Model):
    user_id: UUID
    display_name: str
    platform_admin: bool
    tenant_id: UUID | None
    platform: bool
    csrf_token: str
    expires_at: datetime
    tenants: list[TenantChoice]


class MeOut(Model):
    user_id: UUID
    kind: str
    display_name: str
    platform_admin: bool
    tenant_id: UUID | None
    platform: bool
    token_roles: list[str] | None
    tenants: list[TenantChoice]


def cookie_policy(request: Request) -> CookiePolicy:
    """Secure behind TLS: the request's scheme, a trusted proxy's X-Forwarded-Proto (the fleet's
    proxy networks, the PROXY-protocol front included), an https public URL, or forced."""
    settings = services_of(request).settings
    fleet = getattr(request.app.state, "fleet_settings", None) or FleetSettings()
    return CookiePolicy.of(
        force_secure=settings.secure_cookies,
        public_url=settings.public_url,
        trusted_proxies=fleet.proxy_from,
    )


async def _issue(request: Request, response: Response, new: NewSession) -> SessionOut:
    settings = services_of(request).settings
    cookie_policy(request).set(
        request, response, COOKIE, new.cookie, max_age=settings.session_hours * 3600
    )
    choices = await sessions.choices_of(services_of(request), new.user.id)
    return SessionOut(
        user_id=new.user.id,
        display_name=new.user.display_name,
        platform_admin=new.user.platform_admin,
        tenant_id=new.tenant_id,
        platform=new.platform,
        csrf_token=new.csrf,
        expires_at=new.expires_at,
        tenants=[TenantChoice.model_validate(c) for c in choices],
    )


@router.post("/login", dependencies=[Depends(no_idempotency_key)])
async def login(request: Request, response: Response, body: LoginIn) -> SessionOut:
    services = services_of(request)
    tenant_id = await sessions.resolve_tenant(services, body.tenant) if body.tenant else None
    new = await sessions.login(
        services,
        request_meta(request),
        body.username,
        body.password,
        tenant_id=tenant_id,
        platform=body.platform,
    )
    return await _issue(request, response, new)


@router.post("/session", dependencies=[Depends(no_idempotency_key)])
async def choose(
    request: Request, response: Response, principal: CurrentPrincipal, body: ChooseIn
) -> SessionOut:
    services = services_of(request)
    tenant_id = await sessions.resolve_tenant(services, body.tenant) if body.tenant else None
    new = await sessions.choose(
        services, request_meta(request), principal, tenant_id=tenant_id, platform=body.platform
    )
    return await _issue(request, response, new)


@router.delete("/session", status_code=204)
async def logout(request: Request, response: Response, principal: CurrentPrincipal) -> None:
    await sessions.logout(services_of(request), principal)
    cookie_policy(request).clear(request, response, COOKIE)


@router.get("/me")
async def me(request: Request, principal: CurrentPrincipal) -> MeOut:
    choices = await sessions.choices_of(services_of(request), principal.user_id)
    return MeOut(
        user_id=principal.user_id,
        kind=principal.kind,
        display_name=principal.display_name,
        platform_admin=principal.platform_admin,
        tenant_id=principal.tenant_id,
        platform=principal.platform,
        token_roles=sorted(principal.token_roles) if principal.token_roles is not None else None,
        tenants=[TenantChoice.model_validate(c) for c in choices],
    )
