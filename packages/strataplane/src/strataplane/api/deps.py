"""Authentication and context dependencies shared by the v1 routes.

A request carries ``Authorization: Bearer spk_...`` or the ``sp_session`` cookie. Session
requests that change something must echo the session's CSRF token in ``X-CSRF-Token``; bearer
requests cannot be forged by a browser and need none.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Header, Request
from platformkit.http import Idempotency, current_request_id
from platformkit.http.idempotency import HEADER as IDEMPOTENCY_HEADER

from strataplane import errors
from strataplane.actions.access import check_member
from strataplane.actions.context import Ctx, Principal, Services, user_ctx
from strataplane.actions.sessions import authenticate_session
from strataplane.actions.tokens import authenticate_token

COOKIE = "sp_session"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def services_of(request: Request) -> Services:
    found: Services = request.app.state.services
    return found


async def current_principal(
    request: Request,
    authorization: Annotated[str | None, Header(description="Bearer spk_... API token")] = None,
) -> Principal:
    cached = getattr(request.state, "principal", None)
    if isinstance(cached, Principal):
        return cached
    services = services_of(request)
    if authorization is not None:
        scheme, _, credential = authorization.partition(" ")
        if scheme.lower() != "bearer" or not credential:
            raise errors.AuthRequired("use Authorization: Bearer <token>")
        principal = await authenticate_token(services, credential.strip())
    elif (cookie := request.cookies.get(COOKIE)) is not None:
        principal, csrf = await authenticate_session(services, cookie)
        if request.method not in SAFE_METHODS:
            sent = request.headers.get(CSRF_HEADER, "")
            if not csrf or not hmac.compare_digest(sent.encode(), csrf.encode()):
                raise errors.CsrfRejected()
    else:
        raise errors.AuthRequired()
    request.state.principal = principal
    return principal


def _ctx(request: Request, principal: Principal) -> Ctx:
    host = request.client.host if request.client is not None else None
    return user_ctx(
        services_of(request), principal, request_id=current_request_id(), source_ip=host
    )


async def tenant_ctx(
    request: Request, principal: Annotated[Principal, Depends(current_principal)]
) -> Ctx:
    """A credential bound to a tenant: its tenant is the request's tenant."""
    if principal.tenant_id is None:
        raise errors.AuthRequired("this request needs a credential bound to a tenant")
    return _ctx(request, principal)


async def platform_ctx(
    request: Request, principal: Annotated[Principal, Depends(current_principal)]
) -> Ctx:
    if not (principal.platform and principal.platform_admin):
        raise errors.PlatformAdminRequired()
    return _ctx(request, principal)


def request_meta(request: Request) -> Ctx:
    """Request id and address for actions that run before anyone is authenticated."""
    host = request.client.host if request.client is not None else None
    return Ctx(services_of(request), None, None, current_request_id(), host)


_KEY_DOC = (
    "Makes a retry safe: a repeat with the same key within 24 h returns the first response "
    "(header Idempotent-Replayed: true) instead of running again."
)
KeyHeader = Annotated[str | None, Header(alias=IDEMPOTENCY_HEADER, description=_KEY_DOC)]


async def _claim(request: Request, ctx: Ctx) -> None:
    if ctx.principal is None or IDEMPOTENCY_HEADER not in request.headers:
        return
    idempotency: Idempotency = request.app.state.idempotency
    await idempotency.claim(request, principal_id=ctx.principal.user_id, tenant_id=ctx.tenant_id)


async def idempotency_key(
    request: Request, ctx: Annotated[Ctx, Depends(tenant_ctx)], key: KeyHeader = None
) -> None:
    """Claims the key of a creating POST once the caller is known to be an active member with
    a role in the tenant, so a refused request never holds a key."""
    if key is not None:
        await check_member(ctx)
    await _claim(request, ctx)


async def platform_idempotency_key(
    request: Request, ctx: Annotated[Ctx, Depends(platform_ctx)], key: KeyHeader = None
) -> None:
    await _claim(request, ctx)


TenantCtx = Annotated[Ctx, Depends(tenant_ctx)]
PlatformCtx = Annotated[Ctx, Depends(platform_ctx)]
CurrentPrincipal = Annotated[Principal, Depends(current_principal)]
