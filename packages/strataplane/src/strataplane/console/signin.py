"""The sign-in pages: local username and password, the provider's single sign-on, choosing a
tenant (or, for a platform admin, the platform), answering one's own invitations, signing out.
They call the same session and invitation actions as ``/api/v1/auth`` and ``/api/v1/me``."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse
from platformkit.http.formcsrf import form_token, form_token_valid, remember_form_token
from starlette.responses import Response

from strataplane import errors
from strataplane.actions import invitations, sessions
from strataplane.actions.sessions import NewSession
from strataplane.api.deps import COOKIE, request_meta, services_of
from strataplane.api.v1.auth import cookie_policy
from strataplane.console.render import TAG, render, safe_next
from strataplane.console.session import field, posted, viewer_of

router = APIRouter(include_in_schema=False, tags=[TAG])
FORM_COOKIE = "sp_form"
Next = Annotated[str | None, Query(max_length=2000)]


def _sso_label(request: Request) -> str | None:
    settings = services_of(request).settings
    if settings.oidc_issuer and settings.oidc_client_id and settings.oidc_tenant:
        return settings.oidc_label
    return None


def _login_page(
    request: Request, next_path: str, *, error: str | None = None, status: int = 200
) -> Response:
    token = form_token(request, FORM_COOKIE)
    page = render(
        request, "login.html", status=status, csrf=token, next=next_path, error=error,
        sso=_sso_label(request), username=None,
    )  # fmt: skip
    remember_form_token(request, page, cookie_policy(request), FORM_COOKIE, token)
    return page


def _with_session(request: Request, response: Response, new: NewSession) -> Response:
    hours = services_of(request).settings.session_hours
    cookie_policy(request).set(request, response, COOKIE, new.cookie, max_age=hours * 3600)
    return response


@router.get("/")
async def home() -> RedirectResponse:
    return RedirectResponse("/fleet", status_code=303)


@router.get("/login")
async def login_page(request: Request, next: Next = None) -> Response:
    return _login_page(request, safe_next(next))


@router.post("/login")
async def login(request: Request) -> Response:
    form = await request.form()
    target = safe_next(field(form, "next", 2000))
    if not form_token_valid(request, FORM_COOKIE, field(form, "csrf_token", 200)):
        return _login_page(request, target, error="The form expired; try again.", status=403)
    services, meta = services_of(request), request_meta(request)
    username, password = field(form, "username", 200), field(form, "password", 1024)
    try:
        new = await sessions.login(services, meta, username, password)
    except errors.InvalidCredentials:
        return _login_page(request, target, error="Wrong username or password.", status=401)
    except errors.SignInThrottled as exc:
        wait = (exc.headers or {}).get("Retry-After", "a few")
        message = f"Too many failed sign-ins; try again in {wait} seconds."
        return _login_page(request, target, error=message, status=429)
    choices = await sessions.choices_of(services, new.user.id)
    if len(choices) == 1:
        principal = (await sessions.authenticate_session(services, new.cookie))[0]
        tenant_id = UUID(str(choices[0]["id"]))
        new = await sessions.choose(services, meta, principal, tenant_id=tenant_id, platform=False)
        return _with_session(request, RedirectResponse(target, status_code=303), new)
    chooser = f"/login/choose?next={target}"
    return _with_session(request, RedirectResponse(chooser, status_code=303), new)


@router.get("/login/choose")
async def choose_page(request: Request, next: Next = None) -> Response:
    viewer = await viewer_of(request, tenant=False)
    choices = await sessions.choices_of(services_of(request), viewer.principal.user_id)
    received = await invitations.received_invitations(request_meta(request), viewer.principal)
    return render(request, "choose.html", choices=choices, next=safe_next(next), received=received)


@router.post("/login/invitations/{invitation_id}/{answer}")
async def answer_invitation(request: Request, invitation_id: str, answer: str) -> Response:
    """Accept (a member, with no role until an admin binds one) or decline one's own
    invitation; another person's is not found."""
    viewer, _ = await posted(request, tenant=False)
    if answer not in ("accept", "decline"):
        raise errors.InvitationNotFound()
    try:
        found = UUID(invitation_id[:64])
    except ValueError:
        raise errors.InvitationNotFound() from None
    await invitations.answer_invitation(
        request_meta(request), viewer.principal, found, accept=answer == "accept"
    )
    return RedirectResponse("/login/choose", status_code=303)


@router.post("/login/choose")
async def choose(request: Request) -> Response:
    viewer, form = await posted(request, tenant=False)
    services = services_of(request)
    chosen = field(form, "tenant", 64)
    platform = chosen == "platform"  # a platform admin's: the platform pages
    try:
        tenant_id = None if platform else UUID(chosen)
    except ValueError:
        raise errors.TenantNotFound(field="tenant") from None
    new = await sessions.choose(
        services, request_meta(request), viewer.principal, tenant_id=tenant_id, platform=platform
    )
    target = "/platform/tenants" if platform else safe_next(field(form, "next", 2000))
    return _with_session(request, RedirectResponse(target, status_code=303), new)


@router.post("/logout")
async def logout(request: Request) -> Response:
    viewer, _ = await posted(request, tenant=False)
    await sessions.logout(services_of(request), viewer.principal)
    response = RedirectResponse("/login", status_code=303)
    cookie_policy(request).clear(request, response, COOKIE)
    return response
