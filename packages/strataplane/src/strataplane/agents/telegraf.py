"""Telegraf's endpoints (docs/strataplane/agents/telegraf.md), plain Starlette routes:

- ``GET /agents/telegraf/config``: the agent's desired artifact as TOML, ``Last-Modified`` =
  ``desired_since``; records it as served.
- ``HEAD /agents/telegraf/config``: the same ``Last-Modified`` for ``--config-url-watch-interval``,
  except while the agent runs an artifact older than its desired one: then the current second,
  so that a watcher whose first-tick baseline already holds the new date still sees a change.
- ``POST /agents/telegraf/heartbeat``: ``outputs.heartbeat`` schema v1; the
  ``X-Strataplane-Config-Hash`` header proves the applied artifact.

Credentials are ``spt_`` tokens as ``Bearer`` or ``Token``. A poll costs no database round trip
when the credential and state caches hold the agent; writes are batched.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from strataplane import errors
from strataplane.actions import fleet_errors as fe
from strataplane.agents.heartbeat import BadHeartbeat, parse_heartbeat
from strataplane.domain.fleet_status import http_date, telegraf_version
from strataplane.render.artifacts import HASH_HEADER
from strataplane.store.fleet_serving import ServingState

if TYPE_CHECKING:
    from strataplane.agents.auth import AgentIdentity
    from strataplane.agents.runtime import FleetRuntime

CONFIG_PATH = "/agents/telegraf/config"
HEARTBEAT_PATH = "/agents/telegraf/heartbeat"
MAX_HEARTBEAT = 1 << 20
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="strataplane"'}


def _runtime(request: Request) -> FleetRuntime:
    runtime: FleetRuntime = request.app.state.fleet
    return runtime


async def _agent(request: Request) -> tuple[FleetRuntime, AgentIdentity, ServingState]:
    rt = _runtime(request)
    who = await rt.credentials.identify(request.headers.get("authorization"))
    state = await rt.states.get(who) if who is not None else None
    if who is None or state is None or state.tenant_state == "deleting":
        raise errors.AuthRequired("unknown or revoked agent credential", headers=_CHALLENGE)
    return rt, who, state


def last_modified(state: ServingState, *, head: bool) -> str:
    assert state.desired_since is not None
    stale = state.served_artifact is not None and state.served_artifact != state.desired_artifact
    if head and stale:
        return http_date(datetime.now(UTC))
    return http_date(state.desired_since)


async def config(request: Request) -> Response:
    rt, who, state = await _agent(request)
    version, raw = telegraf_version(request.headers.get("user-agent"))
    if version is not None and version != state.version:
        state = await rt.version_reported(who, version, raw)
    rt.batcher.seen(who.tenant_id, who.agent_id, rt.source_ip(request))
    if not state.approved:
        raise fe.AgentNotApproved("an operator approves this agent first")
    if "unsupported_version" in state.flags:
        raise fe.UnsupportedVersion("Telegraf 1.37 or later is needed (outputs.heartbeat)")
    if state.desired_artifact is None or state.desired_since is None:
        raise fe.NoConfigYet(headers={"Retry-After": "10"})
    head = request.method == "HEAD"
    headers = {"Last-Modified": last_modified(state, head=head), "Cache-Control": "no-store"}
    if head:
        return Response(None, 200, headers, media_type="application/toml")
    body = await rt.artifacts.get(who.tenant_id, state.desired_artifact)
    if body is None:
        raise fe.NoConfigYet(headers={"Retry-After": "10"})
    if state.served_artifact != state.desired_artifact:
        rt.served(state)
    return Response(body, 200, headers, media_type="application/toml")


async def heartbeat(request: Request) -> Response:
    rt, who, _state = await _agent(request)
    raw = await request.body()
    if len(raw) > MAX_HEARTBEAT:
        raise fe.BadReport("heartbeat larger than 1 MiB")
    try:
        hb = parse_heartbeat(who.agent_id, json.loads(raw), request.headers.get(HASH_HEADER))
    except (ValueError, BadHeartbeat) as exc:
        raise fe.BadReport(str(exc)) from None
    rt.batcher.heartbeat(who.tenant_id, hb, rt.source_ip(request))
    return Response(None, 200)


def routes() -> list[Route]:
    return [
        Route(CONFIG_PATH, config, methods=["GET", "HEAD"], include_in_schema=False),
        Route(HEARTBEAT_PATH, heartbeat, methods=["POST"], include_in_schema=False),
    ]
