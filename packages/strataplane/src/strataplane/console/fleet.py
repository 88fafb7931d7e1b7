"""Fleet pages: the overview (agents by kind, health, sync share, versions, who stopped
reporting; filtered by host labels) with its live event stream, and one agent's page (desired
against applied, its artifact, its status history, explain). The reads are the API's."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.responses import Response

from strataplane import errors
from strataplane.actions import fleet_explain, fleet_inventory
from strataplane.actions.context import Ctx
from strataplane.actions.fleet_errors import AgentNotFound
from strataplane.api.v1.fleet_enrollment import fleet_settings
from strataplane.api.v1.fleet_inventory import parse_labels
from strataplane.console import charts
from strataplane.console.render import FRAGMENT_HEADER, TAG, render, wants_fragment
from strataplane.console.session import viewer_of
from strataplane.domain.fleet_overview import overview
from strataplane.store.fleet_agents import Agent, AgentFilter

router = APIRouter(include_in_schema=False, tags=[TAG])

# The overview reads at most this many agents (pages of the API's list); past it the page
# says it shows a part of the fleet.
MAX_AGENTS = 5000
PAGE = 500
TABLE_ROWS = 200
POLL = 2.0  # seconds between the stream's looks at the fleet
KEEPALIVE = 15.0
LIFETIME = 600.0


async def read_fleet(ctx: Ctx, labels: dict[str, str]) -> tuple[list[Agent], bool]:
    """The agents the viewer may read whose host has ``labels``; True when capped."""
    found: list[Agent] = []
    after: UUID | None = None
    while len(found) < MAX_AGENTS:
        page, after = await fleet_inventory.list_agents(
            ctx, AgentFilter(labels=labels), after=after, limit=PAGE
        )
        found.extend(page)
        if after is None:
            return found, False
    return found[:MAX_AGENTS], True


def _labels(text: str) -> dict[str, str]:
    items = [part.strip() for part in text.split(",") if part.strip()]
    return parse_labels(items[:20])


LabelQuery = Annotated[str, Query(max_length=2000)]


@router.get("/fleet")
async def fleet_page(request: Request, label: LabelQuery = "") -> Response:
    viewer = await viewer_of(request)
    try:
        labels = _labels(label)
    except errors.InvalidInput:
        labels, bad = {}, True
    else:
        bad = False
    agents, capped = await read_fleet(viewer.ctx, labels)
    summary = overview(agents)
    by_id = {a.id: a for a in agents}
    context: dict[str, Any] = {
        "summary": summary,
        "agents": agents[:TABLE_ROWS],
        "silent": [by_id[i] for i in summary.not_reporting[:TABLE_ROWS]],
        "capped": capped,
        "label": label,
        "bad_label": bad,
        "kind_chart": charts.bars("Agents by kind", summary.by_kind),
        "health_chart": charts.bars("Agents by health", summary.by_health, css="health"),
        "sync_chart": charts.share("Agents in sync", summary.in_sync, summary.agents),
        "version_chart": charts.bars("Agents by version", summary.versions[:12]),
        "table_rows": TABLE_ROWS,
    }
    if wants_fragment(request):
        return render(request, "_fleet_live.html", headers={FRAGMENT_HEADER: "1"}, **context)
    return render(request, "fleet.html", **context)


def fingerprint(agents: list[Agent]) -> str:
    """Changes whenever what the overview shows changes."""
    digest = hashlib.sha256()
    for a in agents:
        seen = a.last_seen_at.isoformat() if a.last_seen_at else ""
        line = f"{a.id}|{a.kind}|{a.version}|{a.health}|{a.sync}|{a.desired_revision_id}|"
        digest.update(f"{line}{a.applied_revision_id}|{seen}\n".encode())
    return digest.hexdigest()


async def fleet_changes(ctx: Ctx, labels: dict[str, str]) -> AsyncIterator[str]:
    """``changed`` whenever the fleet the page shows changed; a comment now and then keeps
    proxies from closing the stream; the stream ends after LIFETIME (the browser reconnects,
    which checks the session again)."""
    loop = asyncio.get_running_loop()
    deadline, quiet_since = loop.time() + LIFETIME, loop.time()
    last = fingerprint((await read_fleet(ctx, labels))[0])
    yield "retry: 3000\n: connected\n\n"
    while loop.time() < deadline:
        await asyncio.sleep(POLL)
        now = fingerprint((await read_fleet(ctx, labels))[0])
        if now != last:
            last, quiet_since = now, loop.time()
            yield "event: changed\ndata: {}\n\n"
        elif loop.time() - quiet_since > KEEPALIVE:
            quiet_since = loop.time()
            yield ": keepalive\n\n"


@router.get("/fleet/events")
async def fleet_events(request: Request, label: LabelQuery = "") -> StreamingResponse:
    viewer = await viewer_of(request)
    return StreamingResponse(
        fleet_changes(viewer.ctx, _labels(label)),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def agent_id_of(text: str) -> UUID:
    try:
        return UUID(text)
    except ValueError:
        raise AgentNotFound() from None


@router.get("/fleet/agents/{agent_id}")
async def agent_page(request: Request, agent_id: str) -> Response:
    viewer = await viewer_of(request)
    found = agent_id_of(agent_id)
    agent = await fleet_inventory.access_agent(viewer.ctx, found)
    agent_url = fleet_settings(request).agent_url
    explain = await fleet_explain.explain_agent(viewer.ctx, found, agent_url=agent_url)
    history = await fleet_explain.agent_history(viewer.ctx, found)
    return render(request, "agent.html", agent=agent, explain=explain, history=history)
