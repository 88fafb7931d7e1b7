"""Account pages: forgot password, the reset link's page, and the account page (password)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from z4j.actions import mfa, passwords
from z4j.actions.context import Ctx
from z4j.actions.errors import Conflict, InvalidInput, ResetNotFound, SignInThrottled
from z4j.api.v1.deps import brain_of, require_ctx
from z4j.console.auth_pages import client_address, form_page
from z4j.console.forms import anonymous_form, field, signed_in_form
from z4j.console.render import render

router = APIRouter(include_in_schema=False)


async def account_page(request: Request, ctx: Ctx, status: int = 200, **context: Any) -> Response:
    status_now = await mfa.status(ctx)
    return render(request, "account.html", status=status, mfa=status_now, **context)


@router.get("/forgot-password")
async def forgot_page(request: Request) -> Response:
    return form_page(request, "forgot.html", email="")


@router.post("/forgot-password")
async def forgot_submit(request: Request) -> Response:
    form = await anonymous_form(request)
    email = field(form, "email")
    try:
        await passwords.request_reset(brain_of(request), email)
    except InvalidInput as exc:
        return form_page(request, "forgot.html", status=422, email=email, error=exc.detail)
    return form_page(request, "forgot.html", email=email, sent=True)


@router.get("/reset-password/{token}")
async def reset_page(request: Request, token: str) -> Response:
    try:
        email = await passwords.reset_email(brain_of(request), token)
    except ResetNotFound as exc:
        return render(request, "error.html", status=404, error=exc, status_code=404)
    return form_page(request, "reset.html", token=token, email=email)


@router.post("/reset-password/{token}")
async def reset_submit(request: Request, token: str) -> Response:
    form = await anonymous_form(request)
    brain = brain_of(request)
    password = field(form, "password")
    try:
        if password != field(form, "password_again"):
            raise InvalidInput("The two passwords differ.", field="password_again")
        email = await passwords.reset_password(brain, token, password)
    except ResetNotFound as exc:
        return render(request, "error.html", status=404, error=exc, status_code=404)
    except InvalidInput as exc:
        email = await passwords.reset_email(brain, token)
        return form_page(
            request, "reset.html", status=422, token=token, email=email, error=exc.detail
        )
    return RedirectResponse(f"/login?{urlencode({'reset': 1, 'email': email})}", status_code=303)


@router.get("/account")
async def account(request: Request) -> Response:
    return await account_page(request, require_ctx(request))


@router.post("/account/password")
async def change_password(request: Request) -> Response:
    ctx, form = await signed_in_form(request)
    new = field(form, "new_password")
    try:
        if new != field(form, "new_password_again"):
            raise InvalidInput("The two new passwords differ.", field="new_password_again")
        await passwords.change_password(
            ctx, field(form, "current_password"), new, client_address(request)
        )
    except (InvalidInput, SignInThrottled) as exc:
        page = await account_page(request, ctx, status=exc.status, error=exc.detail or exc.title)
        page.headers.update(exc.headers)
        return page
    return await account_page(
        request, ctx, notice="Password changed; your other sessions were signed out."
    )


async def _mfa_form(request: Request, work: Any) -> Response:
    """Run ``work(ctx, code)`` for an MFA form; the account page with its outcome."""
    ctx, form = await signed_in_form(request)
    try:
        context = await work(ctx, field(form, "code"))
    except (InvalidInput, Conflict) as exc:
        return await account_page(request, ctx, status=exc.status, error=exc.detail or exc.title)
    return await account_page(request, ctx, **context)


@router.post("/account/mfa/start")
async def mfa_start(request: Request) -> Response:
    async def start(ctx: Ctx, _code: str) -> dict[str, Any]:
        return {"enrolment": await mfa.start_enrolment(ctx)}

    return await _mfa_form(request, start)


@router.post("/account/mfa/confirm")
async def mfa_confirm(request: Request) -> Response:
    async def confirm(ctx: Ctx, code: str) -> dict[str, Any]:
        codes = await mfa.confirm_enrolment(ctx, code)
        return {"recovery_codes": codes, "notice": "Two-factor sign-in is on."}

    return await _mfa_form(request, confirm)


@router.post("/account/mfa/disable")
async def mfa_disable(request: Request) -> Response:
    async def off(ctx: Ctx, code: str) -> dict[str, Any]:
        await mfa.disable(ctx, code)
        return {"notice": "Two-factor sign-in is off."}

    return await _mfa_form(request, off)


@router.post("/account/mfa/recovery-codes")
async def mfa_codes(request: Request) -> Response:
    async def regenerate(ctx: Ctx, code: str) -> dict[str, Any]:
        codes = await mfa.regenerate_codes(ctx, code)
        return {"recovery_codes": codes, "notice": "New recovery codes; the old ones stopped."}

    return await _mfa_form(request, regenerate)
