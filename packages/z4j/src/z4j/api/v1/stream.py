"""Server-sent events: ``changed`` whenever something a project's pages show may have changed.

Ingest and the agent channel notify ``brain.changes``; each stream waits on it, lets a burst
settle for ``DEBOUNCE`` seconds and sends one ``changed`` event, so a page refreshes at most
about twice a second however fast events arrive. Pages then fetch their own fragment again:
the stream carries no data, so it needs no permission beyond reading the project, checked
once when it opens. A stream ends after ``LIFETIME``; browsers reconnect on their own, which
checks the session again.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from z4j.actions.access import access_project
from z4j.api.v1.deps import CtxDep
from z4j.brain import Brain

DEBOUNCE = 0.5
KEEPALIVE = 15.0
LIFETIME = 600.0

router = APIRouter(tags=["live"])


async def change_events(
    brain: Brain,
    *,
    debounce: float = DEBOUNCE,
    keepalive: float = KEEPALIVE,
    lifetime: float = LIFETIME,
) -> AsyncIterator[str]:
    changed = asyncio.Event()

    async def watch() -> None:
        # Holding the condition between waits means no notification can slip past unseen.
        async with brain.changes:
            while True:
                await brain.changes.wait()
                changed.set()

    watcher = asyncio.create_task(watch())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + lifetime
    try:
        yield "retry: 3000\n: connected\n\n"
        while loop.time() < deadline:
            try:
                await asyncio.wait_for(changed.wait(), timeout=keepalive)
            except TimeoutError:
                yield ": keepalive\n\n"
                continue
            await asyncio.sleep(debounce)
            changed.clear()
            yield "event: changed\ndata: {}\n\n"
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


@router.get(
    "/projects/{project_id}/events/stream",
    summary="Live change notifications (SSE)",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def stream(project_id: uuid.UUID, ctx: CtxDep) -> StreamingResponse:
    await access_project(ctx, project_id)
    return StreamingResponse(
        change_events(ctx.brain),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
