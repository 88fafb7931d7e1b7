"""Two-factor sign-in: the code step of a sign-in, enrolment, recovery codes, the project rule."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request, Response, status

from z4j.actions import mfa, sessions
from z4j.api.v1 import cookies
from z4j.api.v1.account import client_address
from z4j.api.v1.account_schemas import (
    CodeIn,
    MfaEnrolmentOut,
    MfaStatusOut,
    RecoveryCodesOut,
    RequireMfaIn,
)
from z4j.api.v1.deps import CtxDep, brain_of
from z4j.api.v1.schemas import UserOut

router = APIRouter(tags=["two-factor"])


@router.post("/auth/login/mfa", summary="Finish a sign-in with a TOTP or recovery code")
async def login_code(body: CodeIn, request: Request, response: Response) -> UserOut:
    brain = brain_of(request)
    signed = await sessions.complete_mfa(
        brain, request.cookies.get(cookies.SESSION), body.code, client_address(request)
    )
    cookies.set_session(request, response, brain.settings, signed.cookie, signed.expires_at)
    return UserOut.model_validate(signed.user)


@router.get("/auth/mfa", summary="Whether the caller has two-factor sign-in on")
async def mfa_status(ctx: CtxDep) -> MfaStatusOut:
    found = await mfa.status(ctx)
    return MfaStatusOut(
        enabled=found.enabled, pending=found.pending, recovery_left=found.recovery_left
    )


@router.post("/auth/mfa/enrol", summary="Start enrolment: a new secret and its otpauth URI")
async def enrol(ctx: CtxDep) -> MfaEnrolmentOut:
    started = await mfa.start_enrolment(ctx)
    return MfaEnrolmentOut(secret=started.secret, otpauth_uri=started.uri)


@router.post("/auth/mfa/confirm", summary="Turn it on with a first code; recovery codes once")
async def confirm(body: CodeIn, ctx: CtxDep) -> RecoveryCodesOut:
    return RecoveryCodesOut(recovery_codes=await mfa.confirm_enrolment(ctx, body.code))


@router.post(
    "/auth/mfa/disable",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Turn it off (a current code needed)",
)
async def disable(body: CodeIn, ctx: CtxDep) -> None:
    await mfa.disable(ctx, body.code)


@router.post(
    "/auth/mfa/recovery-codes", summary="New recovery codes (a current code needed); shown once"
)
async def regenerate(body: CodeIn, ctx: CtxDep) -> RecoveryCodesOut:
    return RecoveryCodesOut(recovery_codes=await mfa.regenerate_codes(ctx, body.code))


@router.put(
    "/projects/{project_id}/require-mfa",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Require two-factor sign-in of the project's members (owners)",
)
async def require(project_id: uuid.UUID, body: RequireMfaIn, ctx: CtxDep) -> None:
    await mfa.set_project_requirement(ctx, project_id, body.required)
