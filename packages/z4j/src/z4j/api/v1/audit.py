"""The audit log over HTTP: filtered pages, a JSON Lines export, and the chain's check."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse

from z4j.actions import audit_read
from z4j.api.v1.account_schemas import AuditCheckOut, AuditEntryOut, AuditPage
from z4j.api.v1.deps import CtxDep
from z4j.store.audit_read import AuditFilters

router = APIRouter(tags=["audit"])
JSONL = "application/jsonl"


def filters(
    actor: Annotated[str | None, Query(max_length=320, description="User id or email.")] = None,
    action: Annotated[
        str | None, Query(max_length=100, description="Exact, or a prefix ending in '.'.")
    ] = None,
    target_type: Annotated[str | None, Query(max_length=40)] = None,
    target_id: uuid.UUID | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> AuditFilters:
    return AuditFilters(
        action=action or None,
        target_type=target_type or None,
        target_id=target_id,
        since=since,
        until=until,
        **audit_read.actor_filter(actor),
    )


FiltersDep = Annotated[AuditFilters, Depends(filters)]
Before = Annotated[uuid.UUID | None, Query(description="Rows older than this id.")]
Limit = Annotated[int, Query(ge=1, le=audit_read.MAX_PAGE)]


async def _page(ctx: CtxDep, f: AuditFilters, before: uuid.UUID | None, limit: int) -> AuditPage:
    rows = await audit_read.read_log(ctx, f, before, limit)
    items = [AuditEntryOut.model_validate(r) for r in rows]
    return AuditPage(items=items, next_before=items[-1].id if len(items) == limit else None)


def _stream(lines: object, name: str) -> StreamingResponse:
    return StreamingResponse(
        lines,  # type: ignore[arg-type]  # an async iterator of bytes
        media_type=JSONL,
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


@router.get("/audit", summary="The whole audit log, newest first (brain administrators)")
async def whole_log(
    ctx: CtxDep,
    f: FiltersDep,
    project_id: uuid.UUID | None = None,
    before: Before = None,
    limit: Limit = 50,
) -> AuditPage:
    return await _page(ctx, replace(f, project_id=project_id), before, limit)


@router.get(
    "/audit/export",
    summary="The whole audit log as JSON Lines in chain order (brain administrators)",
    response_class=StreamingResponse,
    responses={200: {"content": {JSONL: {}}}},
)
async def whole_export(
    ctx: CtxDep, f: FiltersDep, project_id: uuid.UUID | None = None
) -> StreamingResponse:
    full = replace(f, project_id=project_id)
    return _stream(await audit_read.export_log(ctx, full), "z4j-audit.jsonl")


@router.get("/audit/verify", summary="Check the HMAC chain (brain administrators)")
async def verify(ctx: CtxDep) -> AuditCheckOut:
    result = await audit_read.verify(ctx)
    return AuditCheckOut(
        ok=result.ok,
        checked=result.checked,
        bad_id=result.bad_id,
        reason=result.reason,
        detail=result.detail,
    )


@router.get("/projects/{project_id}/audit", summary="A project's audit log, newest first (admins)")
async def project_log(
    project_id: uuid.UUID, ctx: CtxDep, f: FiltersDep, before: Before = None, limit: Limit = 50
) -> AuditPage:
    return await _page(ctx, replace(f, project_id=project_id), before, limit)


@router.get(
    "/projects/{project_id}/audit/export",
    summary="A project's audit log as JSON Lines in chain order (admins)",
    response_class=StreamingResponse,
    responses={200: {"content": {JSONL: {}}}},
)
async def project_export(project_id: uuid.UUID, ctx: CtxDep, f: FiltersDep) -> StreamingResponse:
    full = replace(f, project_id=project_id)
    return _stream(await audit_read.export_log(ctx, full), f"z4j-audit-{project_id}.jsonl")
