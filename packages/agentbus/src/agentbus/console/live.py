"""``GET /console/live``: the tenant's live counts as server-sent events (``event: counts``),
every ``INTERVAL_S`` while the page is open and whenever they change, and the console's static
files (its stylesheet and the few lines of script that apply the events)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from importlib.resources import files

from fastapi import APIRouter, Request
from platformkit.db.scope import tenant_transaction
from starlette.responses import Response, StreamingResponse

from agentbus.console.sessions import COOKIE, operator_of
from agentbus.db import SCOPE
from agentbus.gateway.context import get_gateway
from agentbus.store import console_views

router = APIRouter(include_in_schema=False)
INTERVAL_S = 2.0
KEEPALIVE_EVERY = 15  # intervals between comments that keep proxies from closing the stream
STATIC = {"console.css": "text/css", "console.js": "text/javascript"}


@router.get("/console/live")
async def live(request: Request) -> Response:
    gw = get_gateway(request)
    op = await operator_of(gw.pool, request.cookies.get(COOKIE))
    if op is None:
        return Response("sign in first", status_code=401)

    async def events() -> AsyncIterator[str]:
        last: dict[str, int] | None = None
        quiet = 0
        while not await request.is_disconnected():
            async with tenant_transaction(gw.pool, SCOPE, op.tenant_id) as conn:
                counts = await console_views.live_counts(conn, op.tenant_id)
            if counts != last:
                yield f"event: counts\ndata: {json.dumps(counts)}\n\n"
                last, quiet = counts, 0
            else:
                quiet += 1
                if quiet % KEEPALIVE_EVERY == 0:
                    yield ": keepalive\n\n"
            await asyncio.sleep(INTERVAL_S)

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


@router.get("/console/static/{name}")
async def static(name: str) -> Response:
    kind = STATIC.get(name)
    if kind is None:
        return Response("not found", status_code=404)
    body = (files("agentbus.console") / "static" / name).read_text(encoding="utf-8")
    headers = {"Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"}
    return Response(body, media_type=kind, headers=headers)
