"""Telegraf's endpoints (docs/strataplane/agents/telegraf.md), served by ``agents/front.py``:

- ``GET /agents/telegraf/config``: the agent's desired artifact as TOML, ``Last-Modified`` =
  ``desired_since``; records it as served.
- ``HEAD /agents/telegraf/config``: the same ``Last-Modified`` for ``--config-url-watch-interval``,
  except while the agent runs an artifact older than its desired one: then the current second,
  so that a watcher whose first-tick baseline already holds the new date still sees a change.
- ``POST /agents/telegraf/heartbeat``: ``outputs.heartbeat`` schema v1; the
  ``X-Strataplane-Config-Hash`` header proves the applied artifact.

Credentials are ``spt_`` tokens as ``Bearer`` or ``Token``, or a class token (``spn_``, mode
``class``): its requests go to ``agents/telegraf_class.py``. A poll costs no database round trip
when the credential and state caches hold the agent; writes are batched.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING

from platformkit import boundedjson

from strataplane import errors
from strataplane.actions import fleet_errors as fe
from strataplane.agents import telegraf_class
from strataplane.agents.client_certs import require_bound
from strataplane.agents.front import AgentRequest, Endpoint, Reply
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
HEARTBEAT_DEPTH = 32  # schema v1 nests 3 deep; log attributes get the rest
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="strataplane"'}
_HASH_HEADER = HASH_HEADER.lower().encode()
_TOML = (b"content-type", b"application/toml")
_NO_STORE = (b"cache-control", b"no-store")


async def _agent(rt: FleetRuntime, req: AgentRequest) -> tuple[AgentIdentity, ServingState]:
    who = await rt.credentials.identify(req.header(b"authorization"))
    state = await rt.states.get(who) if who is not None else None
    if who is None or state is None or state.tenant_state == "deleting" or state.kind != "telegraf":
        raise errors.AuthRequired("unknown or revoked agent credential", headers=_CHALLENGE)
    return who, state


def _source(rt: FleetRuntime, req: AgentRequest) -> str | None:
    return rt.source_ip(req.peer, req.header(b"x-forwarded-for"))


@lru_cache(maxsize=256)
def _user_agent_version(user_agent: str | None) -> tuple[str | None, str | None]:
    return telegraf_version(user_agent)


@lru_cache(maxsize=4096)
def _date(when: datetime) -> bytes:
    return http_date(when).encode()


def last_modified(state: ServingState, *, head: bool) -> bytes:
    assert state.desired_since is not None
    stale = state.served_artifact is not None and state.served_artifact != state.desired_artifact
    if head and stale:
        return http_date(datetime.now(UTC)).encode()
    return _date(state.desired_since)


async def config(rt: FleetRuntime, req: AgentRequest) -> Reply:
    if telegraf_class.class_credential_of(req.header(b"authorization")) is not None:
        return await telegraf_class.config(rt, req)
    who, state = await _agent(rt, req)
    version, raw = _user_agent_version(req.header(b"user-agent"))
    if version is not None and version != state.version:
        state = await rt.version_reported(who, version, raw)
    rt.batcher.seen(who.tenant_id, who.agent_id, _source(rt, req))
    if not state.approved:
        raise fe.AgentNotApproved("an operator approves this agent first")
    if "unsupported_version" in state.flags:
        raise fe.UnsupportedVersion("Telegraf 1.37 or later is needed (outputs.heartbeat)")
    if state.desired_artifact is None or state.desired_since is None:
        raise fe.NoConfigYet(headers={"Retry-After": "10"})
    head = req.method == "HEAD"
    headers = [(b"last-modified", last_modified(state, head=head)), _NO_STORE, _TOML]
    if head:
        return Reply(200, headers)
    body = await rt.artifacts.get(who.tenant_id, state.desired_artifact)
    if body is None:
        raise fe.NoConfigYet(headers={"Retry-After": "10"})
    if state.served_artifact != state.desired_artifact:
        rt.served(state)
    return Reply(200, headers, body)


def _bad_report(field: str, reason: str, kind: str) -> fe.BadReport:
    """The kernel's validation shape: the field, and one entry per problem."""
    error = {"field": field, "msg": reason, "type": kind}
    return fe.BadReport(reason, field=field, errors=[error])


async def heartbeat(rt: FleetRuntime, req: AgentRequest) -> Reply:
    if telegraf_class.class_credential_of(req.header(b"authorization")) is not None:
        return await telegraf_class.heartbeat(rt, req, MAX_HEARTBEAT, HEARTBEAT_DEPTH)
    who, state = await _agent(rt, req)
    # outputs.heartbeat can present a client certificate (the config URL fetch cannot)
    require_bound(rt, req, state)
    raw = await req.body(MAX_HEARTBEAT)
    try:
        parsed = boundedjson.loads(raw, max_depth=HEARTBEAT_DEPTH)
    except boundedjson.JsonRefused as exc:
        raise _bad_report("body", exc.reason, "json") from None
    try:
        hb = parse_heartbeat(who.agent_id, state.external_id, parsed, req.header(_HASH_HEADER))
    except BadHeartbeat as exc:
        raise _bad_report(exc.field or "body", str(exc), "heartbeat") from None
    rt.batcher.heartbeat(who.tenant_id, hb, _source(rt, req))
    return Reply(200, [])


ENDPOINTS = {
    CONFIG_PATH: Endpoint(frozenset({"GET", "HEAD"}), config),
    HEARTBEAT_PATH: Endpoint(frozenset({"POST"}), heartbeat),
}
