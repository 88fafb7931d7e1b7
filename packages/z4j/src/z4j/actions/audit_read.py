"""Reading, exporting and verifying the audit log.

Brain administrators read every row (global ones too); a project's admins and owners read the
rows of that project (``Permission.AUDIT_READ``). Export streams JSON Lines in chain order
from one server-side cursor, so memory stays flat however long the log. Verification is
``z4j audit verify``'s own walk (``actions.audit.verify_log``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from platformkit.db.scope import transaction

from z4j.actions.access import access_project
from z4j.actions.audit import AuditCheck, verify_log
from z4j.actions.context import Ctx
from z4j.actions.errors import InvalidInput, PermissionDenied
from z4j.domain.roles import Permission
from z4j.store import audit_read
from z4j.store.audit_read import AuditFilters
from z4j.store.users import normalize_email

MAX_PAGE = 200


def actor_filter(value: str | None) -> dict[str, Any]:
    """``actor`` as given: a user id, else an email."""
    if not value:
        return {}
    try:
        return {"actor_id": uuid.UUID(value)}
    except ValueError:
        return {"actor_email": normalize_email(value)}


async def _allowed(ctx: Ctx, filters: AuditFilters) -> None:
    if filters.project_id is None:
        if not ctx.actor.is_admin:
            raise PermissionDenied("Only brain administrators read the whole audit log.")
        return
    await access_project(ctx, filters.project_id, Permission.AUDIT_READ)


async def read_log(
    ctx: Ctx, filters: AuditFilters, before: uuid.UUID | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"limit is 1 to {MAX_PAGE}.", field="limit")
    await _allowed(ctx, filters)
    async with transaction(ctx.brain.pool) as conn:
        return await audit_read.page(conn, filters, before, limit)


def _text(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return value


def as_line(row: dict[str, Any]) -> bytes:
    return json.dumps({k: _text(v) for k, v in row.items()}, ensure_ascii=False).encode() + b"\n"


async def export_log(ctx: Ctx, filters: AuditFilters) -> AsyncIterator[bytes]:
    """Check permission now, then return the JSON Lines of every matching row, oldest first."""
    await _allowed(ctx, filters)
    pool = ctx.brain.pool

    async def lines() -> AsyncIterator[bytes]:
        async with transaction(pool) as conn:
            async for batch in audit_read.export(conn, filters):
                yield b"".join(as_line(r) for r in batch)

    return lines()


async def verify(ctx: Ctx) -> AuditCheck:
    if not ctx.actor.is_admin:
        raise PermissionDenied("Only brain administrators verify the audit log.")
    async with transaction(ctx.brain.pool) as conn:
        return await verify_log(conn, ctx.brain.secrets.audit_key)
