"""The caller's own account: resetting a forgotten password and changing it."""

from __future__ import annotations

from fastapi import APIRouter, Request, status

from z4j.actions import passwords
from z4j.api.v1.account_schemas import Accepted, PasswordChangeIn, ResetIn, ResetRequestIn
from z4j.api.v1.deps import CtxDep, brain_of

router = APIRouter(tags=["account"])

RESET_SENT = "If an account has this email, a link to reset its password is on its way."


def client_address(request: Request) -> str | None:
    return request.client.host if request.client is not None else None


@router.post(
    "/auth/password-reset",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Mail a reset link (valid 60 min, once); the same answer for any address",
)
async def request_reset(body: ResetRequestIn, request: Request) -> Accepted:
    await passwords.request_reset(brain_of(request), body.email)
    return Accepted(detail=RESET_SENT)


@router.post(
    "/auth/password-reset/confirm",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Set a new password with a reset link's token; every session of the account ends",
)
async def reset(body: ResetIn, request: Request) -> None:
    await passwords.reset_password(brain_of(request), body.token, body.password)


@router.post(
    "/auth/password",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Change the caller's password (the current one needed); other sessions end",
)
async def change(body: PasswordChangeIn, ctx: CtxDep, request: Request) -> None:
    await passwords.change_password(
        ctx, body.current_password, body.new_password, client_address(request)
    )
