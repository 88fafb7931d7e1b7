"""Vector's endpoints (docs/strataplane/agents/vector.md), served by ``agents/front.py``:

- ``GET /agents/vector/config``: the agent's desired artifact as TOML, for Vector's ``http``
  provider, which GETs the whole configuration every ``poll_interval_secs`` and reloads on
  what differs; records it as served. Vector does not look at the status code: an error body
  fails to parse and Vector keeps what it runs (at start-up it exits).
- ``POST /agents/vector/heartbeat``: the rendered heartbeat sink's newline-delimited JSON;
  ``X-Strataplane-Config-Hash`` proves the applied artifact, ``X-Strataplane-Instance-Id``
  must be the enrolled instance id.

Credentials are ``spv_`` tokens as ``Bearer``; an agent of another kind gets 401. A
configuration that refers to Secrets is served with their values filled in
(agents/vector_secrets.py); the stored artifact and the caches hold only the references.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from starlette.datastructures import State

from strataplane import errors
from strataplane.actions import fleet_errors as fe
from strataplane.agents import vector_secrets
from strataplane.agents.front import AgentRequest, Endpoint, Reply
from strataplane.agents.heartbeat import BadHeartbeat
from strataplane.agents.vector_heartbeat import parse_vector_heartbeat
from strataplane.domain.fleet_status import vector_version
from strataplane.render.artifacts import HASH_HEADER
from strataplane.render.vector import HEARTBEAT_PATH, INSTANCE_HEADER, TOKEN_ENV
from strataplane.store.fleet_serving import ServingState

if TYPE_CHECKING:
    from strataplane.agents.auth import AgentIdentity
    from strataplane.agents.runtime import FleetRuntime

__all__ = ["CONFIG_PATH", "HEARTBEAT_PATH", "MAX_HEARTBEAT", "bootstrap", "endpoints"]

CONFIG_PATH = "/agents/vector/config"
MAX_HEARTBEAT = 1 << 20
POLL_INTERVAL_SECS = 30
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="strataplane"'}
_HASH_HEADER = HASH_HEADER.lower().encode()
_INSTANCE_HEADER = INSTANCE_HEADER.lower().encode()
_TOML = (b"content-type", b"application/toml")
_NO_STORE = (b"cache-control", b"no-store")


def bootstrap(config_url: str, poll_interval_secs: int = POLL_INTERVAL_SECS) -> str:
    """The file Vector starts with: its ``http`` provider pointed at this server, the
    credential from the environment (Vector expands it in files it reads), and
    ``interpolate_env`` so that the served configuration's ``${...}`` are expanded too."""
    return (
        "[provider]\n"
        'type = "http"\n'
        f'url = "{config_url}"\n'
        f"poll_interval_secs = {poll_interval_secs}\n"
        "interpolate_env = true\n\n"
        "[provider.request.headers]\n"
        f'Authorization = "Bearer ${{{TOKEN_ENV}}}"\n'
    )


async def _agent(rt: FleetRuntime, req: AgentRequest) -> tuple[AgentIdentity, ServingState]:
    who = await rt.credentials.identify(req.header(b"authorization"))
    state = await rt.states.get(who) if who is not None else None
    if who is None or state is None or state.tenant_state == "deleting" or state.kind != "vector":
        raise errors.AuthRequired("unknown or revoked agent credential", headers=_CHALLENGE)
    return who, state


def _source(rt: FleetRuntime, req: AgentRequest) -> str | None:
    return rt.source_ip(req.peer, req.header(b"x-forwarded-for"))


@lru_cache(maxsize=256)
def _user_agent_version(user_agent: str | None) -> tuple[str | None, str | None]:
    return vector_version(user_agent) if user_agent and "Vector/" in user_agent else (None, None)


async def config(rt: FleetRuntime, state: State, req: AgentRequest) -> Reply:
    who, serving = await _agent(rt, req)
    version, raw = _user_agent_version(req.header(b"user-agent"))
    if version is not None and version != serving.version:
        serving = await rt.version_reported(who, version, raw)
    rt.batcher.seen(who.tenant_id, who.agent_id, _source(rt, req))
    if not serving.approved:
        raise fe.AgentNotApproved("an operator approves this agent first")
    if serving.desired_artifact is None:
        raise fe.NoConfigYet(headers={"Retry-After": "10"})
    body = await rt.artifacts.get(who.tenant_id, serving.desired_artifact)
    if body is None:
        raise fe.NoConfigYet(headers={"Retry-After": "10"})
    if vector_secrets.has_references(body):
        body = await vector_secrets.with_secrets(rt, state, req, who, serving, body)
    if serving.served_artifact != serving.desired_artifact:
        rt.served(serving)
    return Reply(200, [_NO_STORE, _TOML], body)


def _bad_report(field: str, reason: str, kind: str) -> fe.BadReport:
    error = {"field": field, "msg": reason, "type": kind}
    return fe.BadReport(reason, field=field, errors=[error])


async def heartbeat(rt: FleetRuntime, req: AgentRequest) -> Reply:
    who, state = await _agent(rt, req)
    raw = await req.body(MAX_HEARTBEAT)
    try:
        hb = parse_vector_heartbeat(
            who.agent_id,
            state.external_id,
            raw,
            req.header(_HASH_HEADER),
            req.header(_INSTANCE_HEADER),
        )
    except BadHeartbeat as exc:
        raise _bad_report(exc.field or "body", str(exc), "heartbeat") from None
    rt.batcher.heartbeat(who.tenant_id, hb, _source(rt, req))
    return Reply(200, [])


def endpoints(state: State) -> dict[str, Endpoint]:
    async def config_handler(rt: FleetRuntime, req: AgentRequest) -> Reply:
        return await config(rt, state, req)

    return {
        CONFIG_PATH: Endpoint(frozenset({"GET"}), config_handler),
        HEARTBEAT_PATH: Endpoint(frozenset({"POST"}), heartbeat),
    }
