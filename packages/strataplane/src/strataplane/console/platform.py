"""Platform pages, for a platform admin whose session is bound to the platform (chosen on the
tenant chooser): the tenants (create with a first admin, suspend, resume, delete, make someone
an admin of a tenant again), the
people of the installation (create a local user, disable, enable) and platform API tokens
(create: the plaintext shown once, on that answer only; revoke). They call the same platform
actions as ``/api/v1/platform``; what those refuse (409, 422) is shown on the page."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from strataplane import errors
from strataplane.actions import tenant_admins, tenants, tokens, users
from strataplane.console.admin import uuid_of
from strataplane.console.render import TAG, refused, render
from strataplane.console.session import ChooseTenant, Viewer, field, posted, viewer_of

router = APIRouter(include_in_schema=False, tags=[TAG])
TENANT_VERBS: dict[str, Callable[..., Awaitable[Any]]] = {
    "suspend": tenants.suspend_tenant,
    "resume": tenants.resume_tenant,
    "delete": tenants.delete_tenant,
}


async def platform_viewer(request: Request, form: bool = False) -> tuple[Viewer, Any]:
    """A platform admin's platform session (one bound to a tenant: the chooser first); anyone
    else is refused by the actions (403)."""
    viewer, posted_form = (await posted(request, tenant=False)) if form else (
        await viewer_of(request, tenant=False), None
    )  # fmt: skip
    if viewer.principal.platform_admin and not viewer.principal.platform:
        raise ChooseTenant()
    return viewer, posted_form


async def _tenants(request: Request, viewer: Viewer, **extra: Any) -> Response:
    found = await tenants.list_tenants(viewer.ctx, limit=500)
    people = [u for u in await users.list_users(viewer.ctx, limit=500) if u.kind == "human"]
    return render(request, "platform_tenants.html", tenants=found, users=people, **extra)


async def _users(request: Request, viewer: Viewer, **extra: Any) -> Response:
    found = await users.list_users(viewer.ctx, limit=500)
    return render(request, "platform_users.html", users=found, **extra)


async def _done_or_shown(
    request: Request, viewer: Viewer, action: Awaitable[Any], back: str
) -> Response:
    try:
        await action
    except errors.StrataplaneError as exc:
        if not refused(exc):
            raise
        page = _tenants if back == "/platform/tenants" else _users
        return await page(request, viewer, refusal=exc, status=exc.status)
    return RedirectResponse(back, status_code=303)


@router.get("/platform/tenants")
async def tenants_page(request: Request) -> Response:
    viewer, _ = await platform_viewer(request)
    return await _tenants(request, viewer)


@router.post("/platform/tenants")
async def create_tenant(request: Request) -> Response:
    """A tenant, with the person chosen as its first admin."""
    viewer, form = await platform_viewer(request, form=True)
    slug, name = field(form, "slug", 64).strip(), field(form, "display_name", 200).strip()
    admin = field(form, "admin", 64)
    admin_id = uuid_of(admin, errors.UserNotFound) if admin else None
    created = tenants.create_tenant(viewer.ctx, slug, name or slug, admin_user_id=admin_id)
    return await _done_or_shown(request, viewer, created, "/platform/tenants")


@router.post("/platform/tenant-admins")
async def restore_admin(request: Request) -> Response:
    """Make the person chosen an admin of the tenant chosen again (a tenant left without one),
    audited in both chains."""
    viewer, form = await platform_viewer(request, form=True)
    tenant = uuid_of(field(form, "tenant", 64), errors.TenantNotFound)
    user = uuid_of(field(form, "user", 64), errors.UserNotFound)
    restored = tenant_admins.restore_tenant_admin(viewer.ctx, tenant, user)
    return await _done_or_shown(request, viewer, restored, "/platform/tenants")


@router.post("/platform/tenants/{tenant_id}/{verb}")
async def tenant_verb(request: Request, tenant_id: str, verb: str) -> Response:
    """Suspend (no sign-ins, no API tokens), resume, or delete (every request refused from
    now on; the deletion runs as a job)."""
    viewer, _ = await platform_viewer(request, form=True)
    action = TENANT_VERBS.get(verb)
    if action is None:
        raise errors.TenantNotFound()
    found = uuid_of(tenant_id, errors.TenantNotFound)
    return await _done_or_shown(request, viewer, action(viewer.ctx, found), "/platform/tenants")


@router.get("/platform/users")
async def users_page(request: Request) -> Response:
    viewer, _ = await platform_viewer(request)
    return await _users(request, viewer)


@router.post("/platform/users")
async def create_user(request: Request) -> Response:
    viewer, form = await platform_viewer(request, form=True)
    username = field(form, "username", 200).strip()
    created = users.create_user(
        viewer.ctx, username, field(form, "display_name", 200).strip() or username,
        field(form, "password", 1024), email=field(form, "email", 320).strip() or None,
        platform_admin=field(form, "platform_admin", 10) == "yes",
    )  # fmt: skip
    return await _done_or_shown(request, viewer, created, "/platform/users")


@router.post("/platform/users/{user_id}/{state}")
async def user_state(request: Request, user_id: str, state: str) -> Response:
    viewer, _ = await platform_viewer(request, form=True)
    if state not in ("disable", "enable"):
        raise errors.UserNotFound()
    found: UUID = uuid_of(user_id, errors.UserNotFound)
    changed = users.set_user_disabled(viewer.ctx, found, state == "disable")
    return await _done_or_shown(request, viewer, changed, "/platform/users")


async def _tokens(request: Request, viewer: Viewer, **extra: Any) -> Response:
    found = await tokens.list_platform_tokens(viewer.ctx)
    return render(request, "platform_tokens.html", tokens=found, **extra)


@router.get("/platform/tokens")
async def tokens_page(request: Request) -> Response:
    viewer, _ = await platform_viewer(request)
    return await _tokens(request, viewer)


@router.post("/platform/tokens")
async def create_token(request: Request) -> Response:
    viewer, form = await platform_viewer(request, form=True)
    name = field(form, "name", 200).strip() or "console"
    created = await tokens.create_platform_token(viewer.ctx, name)
    return await _tokens(request, viewer, created=created.plaintext)


@router.post("/platform/tokens/{token_id}/revoke")
async def revoke_token(request: Request, token_id: str) -> Response:
    viewer, _ = await platform_viewer(request, form=True)
    await tokens.revoke_platform_token(viewer.ctx, uuid_of(token_id, errors.TokenNotFound))
    return RedirectResponse("/platform/tokens", status_code=303)
