"""The audit log page: the tenant's chain, newest first, and its verification on demand."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from strataplane.actions import audit
from strataplane.console.render import TAG, render
from strataplane.console.session import posted, viewer_of

router = APIRouter(include_in_schema=False, tags=[TAG])
PAGE = 100


@router.get("/audit")
async def audit_page(
    request: Request, before: Annotated[int | None, Query(ge=1, le=2**62)] = None
) -> Response:
    viewer = await viewer_of(request)
    events = await audit.list_audit_events(viewer.ctx, before=before, limit=PAGE)
    older = events[-1]["seq"] if len(events) == PAGE else None
    return render(request, "audit.html", events=events, older=older, check=None)


@router.post("/audit/verify")
async def verify(request: Request) -> Response:
    viewer, _ = await posted(request)
    check = await audit.verify_audit(viewer.ctx)
    events = await audit.list_audit_events(viewer.ctx, limit=PAGE)
    older = events[-1]["seq"] if len(events) == PAGE else None
    return render(request, "audit.html", events=events, older=older, check=check)
