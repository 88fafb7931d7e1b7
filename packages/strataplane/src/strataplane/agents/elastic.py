"""Elastic Agent's endpoints, the Fleet Server protocol as elastic/fleet-server's
``model/openapi.yml`` describes it (docs/strataplane/agents/elastic-agent.md), served by
``agents/front.py``:

- ``POST /api/fleet/agents/enroll`` with ``Authorization: ApiKey <enrollment token>``;
- ``POST /api/fleet/agents/{id}/checkin``: a long poll answered with the agent's pending
  actions (a POLICY_CHANGE whenever its desired artifact is not the policy it was last sent),
  its rounds bounded per worker (agents/checkin_gate.py);
- ``POST /api/fleet/agents/{id}/acks``.

Agents authenticate with their ``spe_`` access key as ``ApiKey``. Errors have Fleet's shape,
``{"statusCode", "error", "message"}``.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from platformkit import boundedjson
from platformkit.db.scope import tenant_transaction
from platformkit.http import ProblemError
from platformkit.ids import uuid7
from platformkit.storable import scrub

from strataplane import errors
from strataplane.actions import fleet_errors as fe
from strataplane.actions.fleet_enrollment import enroll_agent
from strataplane.agents import elastic_secrets
from strataplane.agents.elastic_report import CheckinReport, checkin_health, fold_checkin
from strataplane.agents.front import AgentRequest, ClientGone, Endpoint, Reply
from strataplane.db import SCOPE
from strataplane.domain.fleet_status import elastic_version
from strataplane.domain.hostnames import is_host_name
from strataplane.store import fleet_agents, fleet_elastic, fleet_notify, fleet_reports
from strataplane.store.fleet_elastic import Action, Component

if TYPE_CHECKING:
    from strataplane.agents.auth import AgentIdentity
    from strataplane.agents.runtime import FleetRuntime

__all__ = ["ENDPOINTS", "POLICY_ID", "checkin_health", "poll_seconds"]

ENROLL_PATH = "/api/fleet/agents/enroll"
CHECKIN_PATH = "/api/fleet/agents/{id}/checkin"
ACKS_PATH = "/api/fleet/agents/{id}/acks"
POLICY_ID = "strataplane"
MAX_BODY = 1 << 20
DEPTH = 32
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
_TOKEN = re.compile(r"[\x21-\x7e]{1,512}")
_STATUSES = frozenset({"online", "error", "degraded", "starting", "configuring", "upgrading"})
_STATES = frozenset(
    {"STARTING", "CONFIGURING", "HEALTHY", "DEGRADED", "FAILED", "STOPPING", "STOPPED"}
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_JSON = (b"content-type", b"application/json")
_STATUS_NAMES = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    413: "RequestEntityTooLarge",
    503: "ServiceUnavailable",
}
_ERROR_NAMES = {
    "agent.not_replaceable": "AgentNotReplaceable",
    "agent.identity": "ErrAgentIdentity",
}


class BadRequest(errors.StrataplaneError):
    code, status, title = "agent.bad_request", 400, "Bad Request"


def _fleet_error(exc: ProblemError) -> Reply:
    """Fleet Server's error body for any refusal."""
    name = _ERROR_NAMES.get(exc.code) or _STATUS_NAMES.get(exc.status, "Error")
    detail = getattr(exc, "detail", None) or exc.title
    body = {"statusCode": exc.status, "error": name, "message": str(detail)}
    headers = [_JSON, *((k.lower().encode(), v.encode()) for k, v in exc.headers.items())]
    return Reply(exc.status, headers, json.dumps(body).encode())


def _json(status: int, body: dict[str, Any]) -> Reply:
    return Reply(status, [_JSON], json.dumps(body, default=str).encode())


async def _body(req: AgentRequest, *, stored: bool = False) -> dict[str, Any]:
    """The JSON object sent; ``stored``: free text PostgreSQL cannot store is kept with U+FFFD
    in its place (walked only when the text has an escape that can hold such a character)."""
    raw = await req.body(MAX_BODY)
    try:
        parsed, suspect = boundedjson.loads_for_storage(raw, max_depth=DEPTH)
    except boundedjson.JsonRefused as exc:
        raise BadRequest(exc.reason) from None
    if not isinstance(parsed, dict):
        raise BadRequest("the body is a JSON object")
    if stored and suspect:
        return scrub(parsed)[0]
    return parsed


def _api_key(req: AgentRequest) -> str:
    scheme, _, token = (req.header(b"authorization") or "").partition(" ")
    if scheme.lower() != "apikey" or not token.strip():
        raise errors.AuthRequired("use Authorization: ApiKey <key>")
    return token.strip()


def _version(req: AgentRequest) -> tuple[str | None, str | None]:
    return elastic_version(req.header(b"user-agent"))


# -- enroll ---------------------------------------------------------------------------------


def _enroll_fields(body: dict[str, Any]) -> tuple[str | None, str | None, str, dict[str, Any]]:
    if body.get("type", "PERMANENT") not in ("PERMANENT", "EPHEMERAL"):
        raise BadRequest("type is PERMANENT or EPHEMERAL")
    agent_id = body.get("id")
    if agent_id is not None and not (isinstance(agent_id, str) and _ID.fullmatch(agent_id)):
        raise BadRequest("id: letters, digits and . _ : -, at most 200")
    replace = body.get("replace_token")
    if replace is not None and not (isinstance(replace, str) and _TOKEN.fullmatch(replace)):
        raise BadRequest("replace_token: printable ASCII, at most 512")
    metadata = body.get("metadata")
    local = metadata.get("local") if isinstance(metadata, dict) else None
    host = local.get("host") if isinstance(local, dict) else None
    hostname = host.get("hostname") if isinstance(host, dict) else None
    if not (isinstance(hostname, str) and is_host_name(hostname)):
        raise BadRequest("metadata.local.host.hostname is an RFC 1123 host name")
    assert isinstance(local, dict)
    return agent_id, replace, hostname, local


async def enroll(rt: FleetRuntime, req: AgentRequest) -> Reply:
    token = _api_key(req)
    body = await _body(req)
    agent_id, replace, hostname, local = _enroll_fields(body)
    done = await enroll_agent(
        rt,
        token,
        instance_id=agent_id or str(uuid7()),
        hostname=hostname,
        source_ip=rt.source_ip(req.peer, req.header(b"x-forwarded-for")),
        agent_url=rt.settings.agent_url,
        kind="elastic-agent",
        replace_token=replace,
    )
    item = {
        "id": done.external_id,
        "active": True,
        "policy_id": POLICY_ID,
        "type": body.get("type", "PERMANENT"),
        "enrolled_at": datetime.now(UTC).isoformat(),
        "user_provided_metadata": {},
        "local_metadata": local,
        "actions": [],
        "access_api_key_id": str(done.agent_id),
        "access_api_key": done.credential,
        "status": "online" if done.approved else "enrolling",
        "tags": [],
    }
    return _json(200, {"action": "created", "item": item})


# -- checkin ---------------------------------------------------------------------------------


def poll_seconds(poll_timeout: object, ceiling: float) -> float:
    """How long a check-in waits for an action: the agent's ``poll_timeout`` less 2 minutes,
    at least 1 minute, at most the server's ceiling (as Fleet Server)."""
    if not isinstance(poll_timeout, str):
        return ceiling
    total = 0.0
    pos = 0
    for m in _DURATION.finditer(poll_timeout):
        if m.start() != pos:
            return ceiling
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(poll_timeout) or pos == 0:
        return ceiling
    return min(max(min(total - 120.0, ceiling), 60.0), ceiling)


def _components(value: object) -> list[Component]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > 200:
        raise BadRequest("components is a list of at most 200")
    out: list[Component] = []
    for c in value:
        if not isinstance(c, dict) or not isinstance(c.get("id"), str):
            raise BadRequest("each component has an id")
        out.append(_unit(c["id"], "", None, c))
        units = c.get("units") or []
        if not isinstance(units, list) or len(units) > 200:
            raise BadRequest("units is a list of at most 200")
        for u in units:
            if not isinstance(u, dict) or not isinstance(u.get("id"), str):
                raise BadRequest("each unit has an id")
            kind = u.get("type")
            if kind not in ("input", "output"):
                raise BadRequest("a unit's type is input or output")
            out.append(_unit(c["id"], u["id"], kind, u))
    # a unit named twice is recorded once, as last reported
    return list({(c.component_id, c.unit_id): c for c in out}.values())


def _unit(component: str, unit: str, kind: str | None, raw: dict[str, Any]) -> Component:
    state = str(raw.get("status", "")).upper()
    if state not in _STATES:
        raise BadRequest(f"status of {component} {unit}: one of {', '.join(sorted(_STATES))}")
    payload = raw.get("payload")
    message = raw.get("message")
    return Component(
        component[:200],
        unit[:200],
        kind,
        state,
        str(message)[:4000] if message is not None else None,
        payload if isinstance(payload, dict) else None,
    )


def _checkin_fields(body: dict[str, Any]) -> tuple[str, str | None, int | None]:
    status = body.get("status")
    if not (isinstance(status, str) and status in _STATUSES):
        raise BadRequest(f"status is one of {', '.join(sorted(_STATUSES))}")
    message = body.get("message")
    if message is not None and not isinstance(message, str):
        raise BadRequest("message is a string")
    idx = body.get("policy_revision_idx")
    if idx is not None and not (
        isinstance(idx, int) and not isinstance(idx, bool) and 0 <= idx < 2**63
    ):
        raise BadRequest("policy_revision_idx is an integer 0 .. 2**63-1")
    return status, message[:4000] if message else None, idx


def _log_level(body: dict[str, Any]) -> str | None:
    """The log level the agent runs at, from ``local_metadata.elastic.agent.log_level``."""
    value: object = body.get("local_metadata")
    for key in ("elastic", "agent", "log_level"):
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) and 0 < len(value) <= 20 else None


def _action_json(agent: str, action: Action, policy: bytes | None) -> dict[str, Any]:
    data: dict[str, Any] = dict(action.data)
    if action.type == "POLICY_CHANGE" and policy is not None:
        body = json.loads(policy)
        data = {"policy": {**body, "id": POLICY_ID, "revision": action.policy_seq}}
    return {
        "id": str(action.id),
        "type": action.type,
        "agent_id": agent,
        "created_at": action.created_at.isoformat(),
        "input_type": "",
        "data": data,
    }


async def _agent(rt: FleetRuntime, req: AgentRequest, path_id: str) -> AgentIdentity:
    who = await rt.credentials.identify(f"Bearer {_api_key(req)}")
    state = await rt.states.get(who) if who is not None else None
    if who is None or state is None or state.tenant_state == "deleting":
        raise errors.AuthRequired("unknown or revoked agent key")
    if state.kind != "elastic-agent":
        raise errors.AuthRequired("unknown or revoked agent key")
    if state.external_id != path_id:
        raise fe.AgentIdentity()
    return who


def _report(who: AgentIdentity, req: AgentRequest, body: dict[str, Any]) -> CheckinReport:
    """What the check-in says, checked (400 on anything outside the protocol)."""
    status, message, idx = _checkin_fields(body)
    components = _components(body.get("components"))
    version, raw = _version(req)
    facts: dict[str, Any] = {"status": status}
    if message:
        facts["message"] = message
    level = _log_level(body)
    if level is not None:
        facts["log_level"] = level
    return CheckinReport(
        who.agent_id, datetime.now(UTC), status, message, idx, components, version, raw, facts
    )


async def _exchange(
    rt: FleetRuntime, req: AgentRequest, who: AgentIdentity, report: CheckinReport, path_id: str
) -> list[dict[str, Any]]:
    """One round of a check-in: record what the agent says, queue a POLICY_CHANGE if its
    desired artifact is not its latest policy, and deliver the pending actions. With none,
    the agent is quiet (agents/elastic_quiet.py) until a notice concerns it."""
    t, a = who.tenant_id, who.agent_id
    epoch = rt.quiet.epoch
    async with tenant_transaction(rt.pool, SCOPE, t) as conn:
        found = await fleet_elastic.checkin_row(conn, t, a)
        if found is None:
            raise errors.AuthRequired("the agent was forgotten")
        row, approved = found
        if not approved:
            raise fe.AgentNotApproved("an operator approves this agent first")
        latest = await fleet_elastic.latest_policy(conn, t, a)
        desired = row.desired_artifact
        if desired is not None and (latest is None or latest.artifact != desired):
            seq = (latest.policy_seq or 0) + 1 if latest is not None else 1
            latest = await fleet_elastic.add_policy_change(conn, t, a, uuid7(), desired, seq)
        idx = report.revision_idx
        proven = await fleet_elastic.policies_at(conn, t, [(a, idx)]) if idx is not None else {}
        update, events, failed = fold_checkin(row, latest, proven.get(a), report)
        if failed is not None and report.message is not None:
            await fleet_elastic.policy_failed(conn, t, a, failed, report.message)
        await fleet_elastic.put_components(conn, t, {a: report.components})
        pending = await fleet_elastic.deliver_pending(conn, t, a)
        sent = [p for p in pending if p.type == "POLICY_CHANGE" and p.artifact is not None]
        if sent and sent[-1].artifact != row.served_artifact:
            await fleet_elastic.mark_served(conn, t, a, sent[-1].artifact)  # type: ignore[arg-type]
        await fleet_reports.write_reports(conn, t, [update])
        await fleet_reports.insert_events(conn, t, events)
    if pending:
        rt.quiet.forget(a)
    else:
        rt.quiet.mark(t, a, desired, epoch)
    out = []
    for p in pending:
        policy = await rt.artifacts.get(t, p.artifact) if p.artifact is not None else None
        if policy is not None and elastic_secrets.has_references(policy):
            policy = await elastic_secrets.with_secrets(rt, req, who, pending, policy)
        out.append(_action_json(path_id, p, policy))
    return out


async def checkin(rt: FleetRuntime, req: AgentRequest) -> Reply:
    """A round at once (a 503 when too many wait, agents/checkin_gate.py), or none for a quiet
    agent (agents/elastic_quiet.py); with no action for the agent, the request is held until a
    notice concerning the agent or the deadline."""
    path_id = req.path.split("/")[4]
    who = await _agent(rt, req, path_id)
    t, a = who.tenant_id, who.agent_id
    seen = await rt.states.get(who)
    quiet = seen is not None and seen.approved and rt.quiet.is_quiet(t, a, seen.desired_artifact)
    if not quiet:
        rt.checkins.admit()
    body = await _body(req, stored=True)
    report = _report(who, req, body)
    ip = rt.source_ip(req.peer, req.header(b"x-forwarded-for"))
    deadline = time.monotonic() + poll_seconds(body.get("poll_timeout"), rt.settings.elastic_poll)
    # held before the first round, so that a notice during it is not missed
    with rt.checkins.hold(t, a) as held:
        if quiet and rt.quiet.is_quiet(t, a, seen.desired_artifact if seen else None):
            rt.batcher.checkin(t, report, ip)
            actions: list[dict[str, Any]] = []
        else:
            async with rt.checkins.arrival():
                actions = await _exchange(rt, req, who, report, path_id)
            rt.batcher.seen(t, a, ip)
        while not actions and await held.wait(deadline - time.monotonic()):
            now = await rt.states.get(who)
            if now is None:
                raise errors.AuthRequired("unknown or revoked agent key")
            direct, held.direct = held.direct, False
            if not direct and seen is not None and now.desired_artifact == seen.desired_artifact:
                continue  # a notice about many agents that does not change this one's policy
            seen = now
            async with rt.checkins.woken():
                actions = await _exchange(
                    rt, req, who, replace(report, at=datetime.now(UTC)), path_id
                )
    ack_token = actions[-1]["id"] if actions else body.get("ack_token")
    return _json(200, {"action": "checkin", "ack_token": ack_token, "actions": actions})


# -- acks ------------------------------------------------------------------------------------


async def acks(rt: FleetRuntime, req: AgentRequest) -> Reply:
    path_id = req.path.split("/")[4]
    who = await _agent(rt, req, path_id)
    rt.checkins.admit_ack()
    body = await _body(req, stored=True)
    events = body.get("events")
    if not isinstance(events, list) or len(events) > 1000:
        raise BadRequest("events is a list of at most 1000")
    items: list[dict[str, Any]] = []
    unenrolled = False
    t, a = who.tenant_id, who.agent_id
    epoch = rt.quiet.epoch
    async with rt.checkins.acknowledgement(), tenant_transaction(rt.pool, SCOPE, t) as conn:
        for event in events:
            try:
                action_id = UUID(str(event.get("action_id"))) if isinstance(event, dict) else None
            except ValueError:
                action_id = None
            if action_id is None or event.get("agent_id", path_id) != path_id:
                items.append(
                    {"status": 400, "message": "an event names one of the agent's actions"}
                )
                continue
            error = event.get("error")
            found = await fleet_elastic.ack(
                conn, t, a, action_id, str(error)[:4000] if error else None
            )
            if found is None:
                items.append({"status": 404, "message": "no such action"})
                continue
            unenrolled = unenrolled or found.type == "UNENROLL"
            items.append({"status": 200, "message": "OK"})
        if unenrolled:
            revoked = await fleet_agents.revoke_credentials(conn, t, a)
            await fleet_notify.credentials_revoked(conn, revoked)
            quiet = None
        else:
            quiet = await fleet_elastic.quiet_desired(conn, t, a)
    if quiet is not None:
        # every action acknowledged: the check-in that proves the policy needs no round
        rt.quiet.mark(t, a, quiet[0], epoch)
    rt.batcher.seen(t, a, rt.source_ip(req.peer, req.header(b"x-forwarded-for")))
    errors_ = any(i["status"] != 200 for i in items)
    return _json(200, {"action": "acks", "errors": errors_, "items": items})


def _fleet(handler: Any) -> Any:
    async def answer(rt: FleetRuntime, req: AgentRequest) -> Reply:
        try:
            reply: Reply = await handler(rt, req)
        except ClientGone:
            raise
        except ProblemError as exc:
            return _fleet_error(exc)
        return reply

    return answer


ENDPOINTS = {
    ENROLL_PATH: Endpoint(frozenset({"POST"}), _fleet(enroll)),
    CHECKIN_PATH: Endpoint(frozenset({"POST"}), _fleet(checkin)),
    ACKS_PATH: Endpoint(frozenset({"POST"}), _fleet(acks)),
}
