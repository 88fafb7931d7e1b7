"""Two-factor sign-in by TOTP, recovery codes, and projects that require it.

Enrolment: ``start_enrolment`` stores a new secret (sealed with AES-256-GCM) and returns it with
its ``otpauth://`` URI for an authenticator app; ``confirm_enrolment`` with a code from the app
turns it on and returns ten recovery codes, shown once and stored as HMACs. From then on
sign-in asks for a code after the password (``z4j.actions.sessions``); a recovery code works in
its place, once. Turning it off or making new recovery codes needs a current code. A project
owner may require two-factor sign-in (``projects.settings.require_mfa``): members without it
are refused that project's pages and API with ``mfa.required`` until they enrol.

Audit: ``mfa.enrol_start``, ``mfa.enable``, ``mfa.disable``, ``mfa.recovery_regenerate``,
``mfa.recovery_used``, ``project.require_mfa``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
import uuid
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from platformkit.db.scope import Conn, transaction

from z4j.actions import audit
from z4j.actions.access import project_scope
from z4j.actions.context import Ctx, User
from z4j.actions.errors import MfaCodeInvalid, MfaState, SessionRequired
from z4j.brain import Brain
from z4j.domain import totp
from z4j.domain.roles import Permission
from z4j.store import mfa as mfa_store
from z4j.store import projects, sessions


@dataclass(frozen=True)
class Enrolment:
    secret: str
    uri: str


@dataclass(frozen=True)
class Status:
    enabled: bool
    pending: bool
    recovery_left: int


def _aead(brain: Brain) -> AESGCM:
    return AESGCM(brain.secrets.derive("mfa-secret"))


def _seal(brain: Brain, user_id: uuid.UUID, secret: str) -> bytes:
    nonce = os.urandom(12)
    return nonce + _aead(brain).encrypt(nonce, secret.encode(), user_id.bytes)


def _open(brain: Brain, user_id: uuid.UUID, sealed: bytes) -> str:
    return _aead(brain).decrypt(sealed[:12], sealed[12:], user_id.bytes).decode()


def _recovery_hash(brain: Brain, user_id: uuid.UUID, code: str) -> str:
    key = brain.secrets.derive("mfa-recovery")
    return hmac.new(key, user_id.bytes + code.encode(), hashlib.sha256).hexdigest()


def _session_user(ctx: Ctx) -> User:
    user = ctx.actor
    if ctx.session_id is None:
        raise SessionRequired("Manage two-factor sign-in from a signed-in session.")
    return user


async def status(ctx: Ctx) -> Status:
    user = ctx.actor
    async with transaction(ctx.brain.pool) as conn:
        row = await mfa_store.get(conn, user.id)
        left = await mfa_store.recovery_left(conn, user.id)
    enabled = row is not None and row["confirmed_at"] is not None
    return Status(enabled, row is not None and not enabled, left)


async def start_enrolment(ctx: Ctx) -> Enrolment:
    user = _session_user(ctx)
    secret = totp.new_secret()
    async with transaction(ctx.brain.pool) as conn:
        row = await mfa_store.get(conn, user.id, lock=True)
        if row is not None and row["confirmed_at"] is not None:
            raise MfaState("Two-factor sign-in is already on; turn it off first.")
        await mfa_store.start(conn, user.id, _seal(ctx.brain, user.id, secret))
        await audit.record(
            conn, ctx.brain, "mfa.enrol_start", actor=user.id, target_type="user",
            target_id=user.id,
        )  # fmt: skip
    return Enrolment(secret, totp.provisioning_uri(secret, user.email))


async def _new_codes(conn: Conn, brain: Brain, user_id: uuid.UUID) -> list[str]:
    codes = totp.new_recovery_codes()
    hashes = [_recovery_hash(brain, user_id, c.replace("-", "")) for c in codes]
    await mfa_store.replace_recovery_codes(conn, user_id, hashes)
    return codes


async def confirm_enrolment(ctx: Ctx, code: str) -> list[str]:
    """Turn two-factor sign-in on with a first code; the recovery codes (shown once). The
    user's other sessions, opened without a code, end."""
    user = _session_user(ctx)
    async with transaction(ctx.brain.pool) as conn:
        row = await mfa_store.get(conn, user.id, lock=True)
        if row is None or row["confirmed_at"] is not None:
            raise MfaState("Start the enrolment first (or it is already on).")
        secret = _open(ctx.brain, user.id, row["secret"])
        step = totp.accepted_step(secret, code, time.time(), row["last_step"])
        if step is None or not await mfa_store.accept_step(conn, user.id, step, confirm=True):
            raise MfaCodeInvalid("That code is not valid; check the app's clock.", field="code")
        codes = await _new_codes(conn, ctx.brain, user.id)
        ended = await sessions.delete_for_user(conn, user.id, keep=ctx.session_id)
        await audit.record(
            conn, ctx.brain, "mfa.enable", actor=user.id, target_type="user", target_id=user.id,
            details={"sessions_ended": ended},
        )  # fmt: skip
    return codes


async def check_code(conn: Conn, brain: Brain, user_id: uuid.UUID, code: str) -> str | None:
    """Inside the caller's transaction: ``totp`` or ``recovery`` when ``code`` passes (and is
    spent), None otherwise."""
    row = await mfa_store.get(conn, user_id, lock=True)
    if row is None or row["confirmed_at"] is None:
        return None
    secret = _open(brain, user_id, row["secret"])
    step = totp.accepted_step(secret, code, time.time(), row["last_step"])
    if step is not None:
        return "totp" if await mfa_store.accept_step(conn, user_id, step, confirm=False) else None
    recovery = totp.normalize_recovery(code)
    if recovery is None:
        return None
    used = await mfa_store.use_recovery_code(
        conn, user_id, _recovery_hash(brain, user_id, recovery)
    )
    if used is None:
        return None
    await audit.record(
        conn, brain, "mfa.recovery_used", actor=user_id, target_type="user", target_id=user_id,
        details={"left": await mfa_store.recovery_left(conn, user_id)},
    )  # fmt: skip
    return "recovery"


async def disable(ctx: Ctx, code: str) -> None:
    """Turn two-factor sign-in off; needs a current code (or a recovery code)."""
    user = _session_user(ctx)
    async with transaction(ctx.brain.pool) as conn:
        if not await mfa_store.enabled(conn, user.id):
            raise MfaState("Two-factor sign-in is not on.")
        if await check_code(conn, ctx.brain, user.id, code) is None:
            raise MfaCodeInvalid("That code is not valid.", field="code")
        await mfa_store.remove(conn, user.id)
        await audit.record(
            conn, ctx.brain, "mfa.disable", actor=user.id, target_type="user", target_id=user.id
        )


async def regenerate_codes(ctx: Ctx, code: str) -> list[str]:
    """New recovery codes (the old ones stop); needs a current code."""
    user = _session_user(ctx)
    async with transaction(ctx.brain.pool) as conn:
        if not await mfa_store.enabled(conn, user.id):
            raise MfaState("Two-factor sign-in is not on.")
        if await check_code(conn, ctx.brain, user.id, code) is None:
            raise MfaCodeInvalid("That code is not valid.", field="code")
        codes = await _new_codes(conn, ctx.brain, user.id)
        await audit.record(
            conn, ctx.brain, "mfa.recovery_regenerate", actor=user.id, target_type="user",
            target_id=user.id,
        )  # fmt: skip
    return codes


async def set_project_requirement(ctx: Ctx, project_id: uuid.UUID, required: bool) -> None:
    """Owners require (or stop requiring) two-factor sign-in for their project. Requiring it
    needs the owner to have it on, so they do not lock themselves out."""
    async with project_scope(ctx, project_id, Permission.PROJECT_MANAGE) as (conn, _access):
        if required and not await mfa_store.enabled(conn, ctx.actor.id):
            raise MfaState("Turn on two-factor sign-in for yourself first.")
        await projects.set_setting(conn, project_id, "require_mfa", required)
        await audit.record(
            conn, ctx.brain, "project.require_mfa", actor=ctx.actor_id, project_id=project_id,
            target_type="project", target_id=project_id, details={"required": required},
        )  # fmt: skip
