"""Sign-in, sign-out and the one-time setup page."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from z4j.actions import sessions, users
from z4j.actions.errors import (
    AuthRequired,
    InvalidCredentials,
    InvalidInput,
    SetupUnavailable,
    SignInThrottled,
)
from z4j.api.v1 import cookies
from z4j.api.v1.deps import brain_of, session_of
from z4j.console.forms import (
    anonymous_form,
    anonymous_token,
    field,
    remember_anonymous_token,
    signed_in_form,
)
from z4j.console.render import render, safe_next

router = APIRouter(include_in_schema=False)


def form_page(request: Request, template: str, status: int = 200, **context: Any) -> Response:
    token = anonymous_token(request)
    response = render(request, template, status=status, form_csrf=token, **context)
    remember_anonymous_token(response, request, token)
    return response


def client_address(request: Request) -> str | None:
    return request.client.host if request.client is not None else None


def _signed_in(request: Request, signed: sessions.SignedIn, target: str) -> Response:
    response = RedirectResponse(safe_next(target), status_code=303)
    cookies.set_session(
        request, response, brain_of(request).settings, signed.cookie, signed.expires_at
    )
    return response


@router.get("/")
async def home(request: Request) -> Response:
    return RedirectResponse("/projects" if session_of(request) else "/login", status_code=303)


@router.get("/login")
async def login_page(
    request: Request, next: str = "/projects", reset: bool = False, email: str = ""
) -> Response:
    if session_of(request) is not None:
        return RedirectResponse(safe_next(next), status_code=303)
    notice = "Your password is changed; sign in with the new one." if reset else None
    return form_page(request, "login.html", next=safe_next(next), email=email, notice=notice)


@router.post("/login")
async def login_submit(request: Request) -> Response:
    form = await anonymous_form(request)
    email, target = field(form, "email"), safe_next(field(form, "next"))
    password = field(form, "password")
    try:
        signed = await sessions.login(brain_of(request), email, password, client_address(request))
    except InvalidCredentials as exc:
        return form_page(
            request, "login.html", status=401, next=target, email=email, error=exc.title
        )
    except SignInThrottled as exc:
        page = form_page(
            request, "login.html", status=429, next=target, email=email, error=exc.title
        )
        page.headers.update(exc.headers)
        return page
    if signed.mfa_pending:
        response = RedirectResponse(f"/login/mfa?{urlencode({'next': target})}", status_code=303)
        cookies.set_session(
            request, response, brain_of(request).settings, signed.cookie, signed.expires_at
        )
        return response
    return _signed_in(request, signed, target)


@router.get("/login/mfa")
async def mfa_page(request: Request, next: str = "/projects") -> Response:
    user = await sessions.mfa_pending_user(brain_of(request), request.cookies.get(cookies.SESSION))
    if user is None:
        return RedirectResponse("/login", status_code=303)
    return form_page(request, "login_mfa.html", next=safe_next(next), pending=user)


@router.post("/login/mfa")
async def mfa_submit(request: Request) -> Response:
    form = await anonymous_form(request)
    brain, target = brain_of(request), safe_next(field(form, "next"))
    cookie = request.cookies.get(cookies.SESSION)
    try:
        signed = await sessions.complete_mfa(
            brain, cookie, field(form, "code"), client_address(request)
        )
    except (InvalidInput, SignInThrottled) as exc:
        user = await sessions.mfa_pending_user(brain, cookie)
        if user is None:
            return RedirectResponse("/login", status_code=303)
        page = form_page(
            request, "login_mfa.html", status=exc.status, next=target, pending=user,
            error=exc.detail or exc.title,
        )  # fmt: skip
        page.headers.update(exc.headers)
        return page
    except AuthRequired:
        return RedirectResponse("/login", status_code=303)
    return _signed_in(request, signed, target)


@router.post("/logout")
async def logout(request: Request) -> Response:
    ctx, _form = await signed_in_form(request)
    await sessions.logout(ctx)
    response = RedirectResponse("/login", status_code=303)
    cookies.clear_session(request, response, ctx.brain.settings)
    return response


async def _setup_open(request: Request, token: str) -> None:
    brain = brain_of(request)
    if not users.setup_token_valid(brain, token) or await users.has_users(brain):
        raise SetupUnavailable("This setup link is not valid, or setup is done.")


@router.get("/setup")
async def setup_page(request: Request, token: str = "") -> Response:
    await _setup_open(request, token)
    return form_page(request, "setup.html", token=token, email="")


@router.post("/setup")
async def setup_submit(request: Request) -> Response:
    form = await anonymous_form(request)
    token, email, password = field(form, "token"), field(form, "email"), field(form, "password")
    brain = brain_of(request)
    try:
        if password != field(form, "password_again"):
            raise InvalidInput("The two passwords differ.", field="password_again")
        await users.complete_setup(brain, token, email, password)
    except InvalidInput as exc:
        return form_page(
            request, "setup.html", status=422, token=token, email=email, error=exc.detail
        )
    signed = await sessions.login(brain, email, password, client_address(request))
    return _signed_in(request, signed, "/projects")
