"""Signing in and out through the API: the same session cookie the dashboard uses."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status

from z4j.actions import sessions
from z4j.api.v1 import cookies
from z4j.api.v1.account_schemas import LoginOut
from z4j.api.v1.deps import CtxDep, OptionalCtxDep, brain_of
from z4j.api.v1.schemas import LoginIn, UserOut

router = APIRouter(tags=["auth"])


@router.post(
    "/auth/login",
    summary="Sign in; sets the session cookie (then POST /auth/login/mfa when mfa_required)",
)
async def login(body: LoginIn, request: Request, response: Response) -> LoginOut:
    brain = brain_of(request)
    source = request.client.host if request.client is not None else None
    signed = await sessions.login(brain, body.email, body.password, source)
    cookies.set_session(request, response, brain.settings, signed.cookie, signed.expires_at)
    return LoginOut.model_validate({**signed.user.__dict__, "mfa_required": signed.mfa_pending})


@router.post(
    "/auth/logout",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="End the session and clear its cookie",
)
async def logout(ctx: OptionalCtxDep, request: Request, response: Response) -> None:
    await sessions.logout(ctx)
    cookies.clear_session(request, response, ctx.brain.settings)


@router.get("/auth/me", summary="The signed-in user")
async def me(ctx: CtxDep) -> UserOut:
    return UserOut.model_validate(ctx.actor)
