"""Accounts as brain administrators see them: list, disable, enable.

Disabling an account ends its sessions in the same transaction and drops its pending password
reset links; its API keys stop at once because every key lookup joins the owner's
``is_active`` (as every session lookup does). Nobody disables their own account, and the brain
keeps one active administrator. The CLI (``z4j users disable``) calls the same functions with
no actor: it has the database's administrative URL, which is more than any account.

Audit: ``user.disable`` and ``user.enable``.
"""

from __future__ import annotations

import uuid
from typing import Any

from platformkit.db.scope import Conn, transaction

from z4j.actions import audit
from z4j.actions.context import Ctx
from z4j.actions.errors import LastAdmin, PermissionDenied, UserNotFound
from z4j.brain import Brain
from z4j.store import password_resets, sessions
from z4j.store import users as user_store


def _admin(ctx: Ctx) -> uuid.UUID:
    if not ctx.actor.is_admin:
        raise PermissionDenied("Only brain administrators manage accounts.")
    return ctx.actor.id


async def list_users(ctx: Ctx) -> list[dict[str, Any]]:
    _admin(ctx)
    async with transaction(ctx.brain.pool) as conn:
        return await user_store.list_all(conn)


async def find_user(brain: Brain, email_or_id: str) -> dict[str, Any]:
    """An account by id or email (the CLI's argument)."""
    async with transaction(brain.pool) as conn:
        try:
            row = await user_store.get(conn, uuid.UUID(email_or_id))
        except ValueError:
            row = await user_store.get_by_email(conn, email_or_id)
    if row is None:
        raise UserNotFound(user=email_or_id)
    return row


async def _switch(
    conn: Conn, brain: Brain, user_id: uuid.UUID, active: bool, actor: uuid.UUID | None
) -> dict[str, Any]:
    row = await user_store.lock(conn, user_id)
    if row is None:
        raise UserNotFound(user_id=str(user_id))
    details: dict[str, Any] = {"email": row["email"]}
    if actor is None:
        details["via"] = "cli"
    if row["is_active"] == active:
        return row
    if not active:
        if row["is_admin"] and await user_store.active_admins(conn) <= 1:
            raise LastAdmin("Make another active administrator first.")
        details["sessions_ended"] = await sessions.delete_for_user(conn, user_id)
        await password_resets.drop_pending(conn, user_id)
    await user_store.set_active(conn, user_id, active)
    await audit.record(
        conn,
        brain,
        "user.enable" if active else "user.disable",
        actor=actor,
        target_type="user",
        target_id=user_id,
        details=details,
    )
    return {**row, "is_active": active}


async def set_active(ctx: Ctx, user_id: uuid.UUID, active: bool) -> dict[str, Any]:
    """Disable or enable an account (idempotent: no row when nothing changes); the account as
    ``list_users`` shows it."""
    actor = _admin(ctx)
    if actor == user_id and not active:
        raise PermissionDenied("You cannot disable your own account.")
    async with transaction(ctx.brain.pool) as conn:
        await _switch(conn, ctx.brain, user_id, active, actor)
        row = await user_store.summary(conn, user_id)
    if row is None:  # locked and switched in this transaction: cannot be gone
        raise UserNotFound(user_id=str(user_id))
    return row


async def set_active_from_cli(brain: Brain, email_or_id: str, active: bool) -> dict[str, Any]:
    row = await find_user(brain, email_or_id)
    async with transaction(brain.pool) as conn:
        return await _switch(conn, brain, row["id"], active, None)
