"""Audit sinks: streaming the tenant's audit chain to webhooks and syslog."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, Depends, Response
from platformkit.storable import PgBigInt
from pydantic import Field

from strataplane.actions import audit_sinks
from strataplane.actions.audit_sinks import SinkState
from strataplane.api.deps import TenantCtx, idempotency_key
from strataplane.api.v1.common import Model

router = APIRouter(prefix="/api/v1/audit-sinks", tags=["audit"])


class AuditSinkIn(Model):
    kind: Literal["webhook", "syslog"]
    config: dict[str, Any] = Field(
        description='webhook: {"url": ...}; syslog: {"address": "host:port", "transport": '
        '"udp" or "tcp"}. Never a credential.'
    )
    credential: Annotated[str | None, Field(max_length=4096)] = Field(
        None, description="A webhook's Authorization header value; write-only."
    )
    start: PgBigInt | None = Field(
        None, ge=1, description="First seq to export (default: after the latest event)."
    )


class AuditSinkPatch(Model):
    config: dict[str, Any] | None = None
    credential: Annotated[str | None, Field(max_length=4096)] = Field(
        None, description="A new Authorization value for a webhook; write-only."
    )
    clear_credential: bool = False


class AuditSinkOut(Model):
    id: UUID
    kind: str
    config: dict[str, Any]
    has_credential: bool
    cursor_seq: int = Field(description="The last seq exported.")
    backlog: int = Field(description="Events not exported yet.")
    last_attempt_at: datetime | None
    last_error: str | None
    created_at: datetime


def _out(state: SinkState) -> AuditSinkOut:
    s = state.sink
    return AuditSinkOut(
        id=s.id,
        kind=s.kind,
        config=s.config,
        has_credential=s.credential_id is not None,
        cursor_seq=s.cursor_seq,
        backlog=state.backlog,
        last_attempt_at=s.last_attempt_at,
        last_error=s.last_error,
        created_at=s.created_at,
    )


@router.post("", status_code=201, dependencies=[Depends(idempotency_key)])
async def create_audit_sink(ctx: TenantCtx, body: AuditSinkIn, response: Response) -> AuditSinkOut:
    sink = await audit_sinks.create_sink(
        ctx, body.kind, body.config, credential=body.credential, start=body.start
    )
    response.headers["Location"] = f"/api/v1/audit-sinks/{sink.id}"
    return _out(await audit_sinks.access_sink(ctx, sink.id))


@router.get("")
async def list_audit_sinks(ctx: TenantCtx) -> list[AuditSinkOut]:
    return [_out(s) for s in await audit_sinks.list_sinks(ctx)]


@router.get("/{sink_id}")
async def get_audit_sink(ctx: TenantCtx, sink_id: UUID) -> AuditSinkOut:
    return _out(await audit_sinks.access_sink(ctx, sink_id))


@router.patch("/{sink_id}")
async def update_audit_sink(ctx: TenantCtx, sink_id: UUID, body: AuditSinkPatch) -> AuditSinkOut:
    """New config or credential; the cursor is kept."""
    await audit_sinks.update_sink(
        ctx,
        sink_id,
        config=body.config,
        credential=body.credential,
        clear_credential=body.clear_credential,
    )
    return _out(await audit_sinks.access_sink(ctx, sink_id))


@router.delete("/{sink_id}", status_code=204)
async def delete_audit_sink(ctx: TenantCtx, sink_id: UUID) -> None:
    await audit_sinks.delete_sink(ctx, sink_id)
