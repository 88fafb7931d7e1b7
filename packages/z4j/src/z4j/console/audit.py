"""Audit pages: the whole log (brain administrators, with the chain check) and a project's."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import Response

from z4j.actions import audit_read
from z4j.actions.access import access_project
from z4j.actions.context import Ctx
from z4j.actions.errors import InvalidInput
from z4j.api.v1.deps import require_ctx
from z4j.console.forms import signed_in_form
from z4j.console.render import render
from z4j.domain.roles import Permission
from z4j.store.audit_read import AuditFilters

router = APIRouter(include_in_schema=False)
_FIELDS = ("actor", "action", "target_type", "target_id", "since", "until")
_LIMITS = {"actor": 320, "action": 100, "target_type": 40, "target_id": 36, "since": 40,
           "until": 40}  # fmt: skip


def _time(value: str, name: str) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"{name} is not a date and time.", field=name) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)  # no offset: UTC


def _filters(query: dict[str, str]) -> AuditFilters:
    for name, size in _LIMITS.items():
        if len(query.get(name, "")) > size:
            raise InvalidInput(f"{name} is too long.", field=name)
    target = query.get("target_id", "")
    try:
        target_id = uuid.UUID(target) if target else None
    except ValueError:
        raise InvalidInput("target_id is not an id.", field="target_id") from None
    return AuditFilters(
        action=query.get("action") or None,
        target_type=query.get("target_type") or None,
        target_id=target_id,
        since=_time(query.get("since", ""), "since"),
        until=_time(query.get("until", ""), "until"),
        **audit_read.actor_filter(query.get("actor")),
    )


async def _page(
    request: Request, ctx: Ctx, project_id: uuid.UUID | None, **context: Any
) -> Response:
    query = {k: request.query_params.get(k, "").strip() for k in _FIELDS}
    extra: dict[str, Any] = {}
    if project_id is not None:
        access = await access_project(ctx, project_id, Permission.AUDIT_READ)
        extra = {"project": access.project, "access": access, "section": "audit"}
    base = f"/projects/{project_id}/audit" if project_id else "/admin/audit"
    status, rows, error, before = 200, [], None, None
    try:
        raw_before = request.query_params.get("before", "")
        before = uuid.UUID(raw_before) if raw_before else None
        f = replace(_filters(query), project_id=project_id)
        rows = await audit_read.read_log(ctx, f, before, 50)
    except (InvalidInput, ValueError) as exc:
        status, error = 422, getattr(exc, "detail", None) or "Invalid filter."
    shown = {k: v for k, v in query.items() if v}
    older = f"{base}?{urlencode({**shown, 'before': rows[-1]['id']})}" if len(rows) == 50 else None
    export = f"/api/v1{base.removeprefix('/admin')}/export?{urlencode(shown)}"
    return render(
        request,
        "audit.html",
        status=status,
        rows=rows,
        query=query,
        older=older,
        export=export,
        base=base,
        error=error,
        **extra,
        **context,
    )


@router.get("/admin/audit")
async def whole_log(request: Request) -> Response:
    return await _page(request, require_ctx(request), None)


@router.post("/admin/audit/verify")
async def verify(request: Request) -> Response:
    ctx, _form = await signed_in_form(request)
    check = await audit_read.verify(ctx)
    return await _page(request, ctx, None, check=check)


@router.get("/projects/{project_id}/audit")
async def project_log(request: Request, project_id: uuid.UUID) -> Response:
    return await _page(request, require_ctx(request), project_id)
